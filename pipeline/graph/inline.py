"""Function inlining for SavedModel and meta-graph views: call nodes replaced by their bodies.

Used by ``pipeline.graph.readers``; see ``Flattener``.
"""

from pipeline.graph.tf_attrs import decode_node_def_attrs
from pipeline.graph.view import lazy_node

_CALL_OPS = frozenset(["PartitionedCall", "StatefulPartitionedCall"])
# Control-flow ops: index of the first data input that feeds the functions' argument 0.
_FIRST_ARG_INPUT = {"While": 0, "StatelessWhile": 0, "_While": 0, "If": 1, "StatelessIf": 1, "_If": 1,
                    "Case": 1, "StatelessCase": 1}
# Output argument names of common multi-output ops, in order (each one tensor), to turn a function
# body's "node:arg:index" into a port. Ops not listed: port = index (right for single-output ops).
_OUTPUT_ARGS = {
    "FusedBatchNorm": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"],
    "FusedBatchNormV2": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"],
    "FusedBatchNormV3": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                         "reserve_space_3"],
    "_FusedBatchNormEx": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                          "reserve_space_3"],
    "Switch": ["output_false", "output_true"], "RefSwitch": ["output_false", "output_true"],
    "Merge": ["output", "value_index"], "RefMerge": ["output", "value_index"],
    "TopK": ["values", "indices"], "TopKV2": ["values", "indices"], "Unique": ["y", "idx"],
    "UniqueV2": ["y", "idx"], "UniqueWithCounts": ["y", "idx", "count"],
    "NonMaxSuppressionV4": ["selected_indices", "valid_outputs"],
    "NonMaxSuppressionV5": ["selected_indices", "selected_scores", "valid_outputs"],
    "CombinedNonMaxSuppression": ["nmsed_boxes", "nmsed_scores", "nmsed_classes", "valid_detections"],
    "QuantizeV2": ["output", "output_min", "output_max"], "MaxPoolWithArgmax": ["output", "argmax"],
    "BroadcastGradientArgs": ["r0", "r1"], "Svd": ["s", "u", "v"], "Qr": ["q", "r"],
    "TensorListPopBack": ["output_handle", "tensor"],
    "CTCGreedyDecoder": ["decoded_indices", "decoded_values", "decoded_shape", "log_probability"],
    "SparseSegmentSumGrad": ["output"], "DecodeProtoV2": ["sizes", "values"],
}
_MAX_INLINE_DEPTH = 64


class _Scope:
    """The outer graph, or one function body instantiated at one call site, with its walk state."""

    __slots__ = ("prefix", "nodes", "order", "parent", "fdef", "args", "outputs", "control_rets", "stack",
                 "seen", "reached", "calls", "children", "names")

    def __init__(self, prefix, node_defs, parent=None, fdef=None, args=None, stack=()):
        self.prefix = prefix
        self.order = [(nd.name, nd) for nd in node_defs]  # file order
        self.nodes = dict(self.order)
        self.parent = parent
        self.fdef = fdef
        self.args = args or {}  # argument name -> the parent scope's tensor feeding it (or None)
        self.outputs = [fdef.ret.get(arg.name) for arg in fdef.signature.output_arg] if fdef is not None else []
        self.control_rets = list(fdef.control_ret.values()) if fdef is not None else []
        self.stack = stack  # names of the functions being inlined, outermost first
        self.seen = set()  # node names visited by the walk
        self.reached = set()  # node names in the view
        self.calls = {}  # call node name -> its body's scope (None: not a call)
        self.children = {}  # node name -> [scopes of the functions in its attributes]
        self.names = {}  # node name -> flat name (inlined scopes)


class Flattener:
    """Inline the functions a GraphDef's nodes call into one flat {name: Node} view.

    A call node (PartitionedCall / StatefulPartitionedCall ``f``, or a node whose op is a library
    function) is replaced by its function's body, named ``<call node>/<body node>``: the body's
    arguments are the call's data inputs, the call's outputs are the body's ``ret`` tensors, and
    the call node itself is dropped. Other nodes with function attributes (While ``cond``/``body``,
    If ``then_branch``/``else_branch``, Case ``branches``, dataset ops) stay, and their functions'
    bodies are added after them as ``<node>/<attr>/<body node>`` (``<attr>_<i>`` for a list), the
    arguments mapped to the node's data inputs where the op's convention is known (While: all, If
    and Case: all but the first), else left unconnected. Recursive functions are not inlined.

    ``reach(roots)`` walks back from root nodes through data and control inputs, into the bodies
    of the functions reached nodes call (from their ``ret`` and ``control_ret``); ``emit()``
    returns the reached nodes in file order, a body where its call node was.
    """

    def __init__(self, graph_def):
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self.outer = _Scope("", graph_def.node)
        self.taken = set(self.outer.nodes)  # flat names in use
        self.entered = set()  # ids of child scopes whose bodies are in the view
        self.func_attrs = {}  # op -> names of its attributes that may hold functions

    # naming

    def flat_name(self, scope, name):
        if scope.parent is None:
            return name
        flat = scope.names.get(name)
        if flat is None:
            flat = base = scope.prefix + name
            i = 1
            while flat in self.taken:
                flat = "{}_{}".format(base, i)
                i += 1
            self.taken.add(flat)
            scope.names[name] = flat
        return flat

    # scopes

    def call_scope(self, scope, nd):
        """The body scope replacing call node ``nd``, or None if it is not a call."""
        op = nd.op
        functions = self.functions
        if op not in functions and op not in _CALL_OPS:
            return None
        name = nd.name
        if name in scope.calls:
            return scope.calls[name]
        child = None
        fname = op if op in functions else nd.attr["f"].func.name if "f" in nd.attr else ""
        if fname in functions and fname not in scope.stack and len(scope.stack) < _MAX_INLINE_DEPTH:
            data = [t for t in nd.input if not t.startswith("^")]
            child = self._new_scope(self.flat_name(scope, name) + "/", functions[fname], scope, data, 0)
        scope.calls[name] = child
        return child

    def func_scopes(self, scope, nd):
        """Child scopes for the functions named in a (non-call) node's attributes."""
        name = nd.name
        children = scope.children.get(name)
        if children is not None:
            return children
        children = []
        found = []
        attr = nd.attr
        for key in self._func_attr_names(nd):
            value = attr[key]
            kind = value.WhichOneof("value")
            if kind == "func":
                found.append((key, value.func.name))
            elif kind == "list" and value.list.func:
                found.extend(("{}_{}".format(key, i), f.name) for i, f in enumerate(value.list.func))
        if found:
            data = [t for t in nd.input if not t.startswith("^")]
            first = _FIRST_ARG_INPUT.get(nd.op)
            for label, fname in sorted(found):
                fdef = self.functions.get(fname)
                if fdef is None or fname in scope.stack or len(scope.stack) >= _MAX_INLINE_DEPTH:
                    continue
                n_args = len(fdef.signature.input_arg)
                skip = first if first is not None else (0 if len(data) == n_args else None)
                prefix = "{}/{}/".format(self.flat_name(scope, name), label)
                children.append(self._new_scope(prefix, fdef, scope, data, skip))
        scope.children[name] = children
        return children

    def _func_attr_names(self, nd):
        """Attributes of ``nd`` that may name functions: func, or lists that are not of another kind.

        An op's attribute types are fixed by its OpDef, so this is worked out once per op.
        """
        op = nd.op
        names = self.func_attrs.get(op)
        if names is None:
            names = []
            for key, value in nd.attr.items():
                kind = value.WhichOneof("value")
                if kind == "func":
                    names.append(key)
                elif kind == "list":
                    lst = value.list
                    if lst.func or not (lst.i or lst.f or lst.s or lst.b or lst.type or lst.shape or lst.tensor):
                        names.append(key)
            self.func_attrs[op] = names
        attr = nd.attr
        return [key for key in names if key in attr]

    def _new_scope(self, prefix, fdef, parent, data_inputs, skip):
        args = {}
        for i, arg in enumerate(fdef.signature.input_arg):
            j = None if skip is None else skip + i
            args[arg.name] = data_inputs[j] if j is not None and j < len(data_inputs) else None
        return _Scope(prefix, fdef.node_def, parent, fdef, args, parent.stack + (fdef.signature.name,))

    # reachability

    def reach(self, roots):
        """Mark everything ``roots`` [(scope, node name)] need, through data, control and functions."""
        work = list(roots)
        pop, push, append = work.pop, self._push, work.append
        has_functions = bool(self.functions)
        while work:
            scope, name = pop()
            seen = scope.seen
            if name in seen:
                continue
            seen.add(name)
            nd = scope.nodes.get(name)
            if nd is None:
                continue
            child = self.call_scope(scope, nd) if has_functions else None
            if child is not None:
                self._enter(child, work)
                work.extend((scope, t[1:]) for t in nd.input if t.startswith("^"))
                continue
            scope.reached.add(name)
            args = scope.args
            for tensor in nd.input:
                if tensor[:1] == "^":
                    append((scope, tensor[1:]))
                elif tensor in args:
                    push(scope, tensor, work)
                else:
                    append((scope, tensor.partition(":")[0]))
            if has_functions:
                for child in self.func_scopes(scope, nd):
                    self._enter(child, work)

    def _enter(self, child, work):
        if id(child) in self.entered:
            return
        self.entered.add(id(child))
        for ref in child.outputs:
            if ref:
                self._push(child, ref, work)
        work.extend((child, name) for name in child.control_rets)

    def _push(self, scope, ref, work):
        while scope.fdef is not None and ref in scope.args:  # a function argument: what feeds it
            ref = scope.args[ref]
            if ref is None:
                return
            scope = scope.parent
        work.append((scope, ref.partition(":")[0]))

    # edges

    def resolve(self, scope, ref):
        """A data input in ``scope``'s syntax -> flat tensor "name" / "name:port", or None (unconnected)."""
        for _ in range(10_000):
            if scope.fdef is not None:
                if ref in scope.args:
                    ref = scope.args[ref]
                    if ref is None:
                        return None
                    scope = scope.parent
                    continue
                parts = ref.split(":")
                name = parts[0]
                nd = scope.nodes.get(name)
                port = _int(parts[-1]) if len(parts) > 1 else 0
                if len(parts) == 3:
                    port = self._port(nd, parts[1], port)
            else:
                name, _, port = ref.partition(":")
                port = _int(port)
                nd = scope.nodes.get(name)
            if nd is not None:
                child = self.call_scope(scope, nd)
                if child is not None:
                    out = child.outputs[port] if port < len(child.outputs) else None
                    if not out:
                        return None
                    scope, ref = child, out
                    continue
            flat = self.flat_name(scope, name) if nd is not None else scope.prefix + name
            return flat if port == 0 else "{}:{}".format(flat, port)
        return None

    def _port(self, nd, out_arg, index):
        if nd is None:
            return index
        if nd.op in self.functions:
            names = [a.name for a in self.functions[nd.op].signature.output_arg]
            return names.index(out_arg) + index if out_arg in names else index
        names = _OUTPUT_ARGS.get(nd.op)
        if names and out_arg in names:
            return names.index(out_arg) + index
        return index

    def control_targets(self, scope, name):
        """Flat node names a control dependency on ``name`` stands for (a call: its body's results)."""
        nd = scope.nodes.get(name)
        child = self.call_scope(scope, nd) if nd is not None else None
        if child is None:
            return [self.flat_name(scope, name) if nd is not None else scope.prefix + name]
        targets = []
        for ref in child.outputs:
            flat = self.resolve(child, ref) if ref else None
            if flat:
                targets.append(flat.partition(":")[0])
        for ret in child.control_rets:
            targets.extend(self.control_targets(child, ret))
        return targets

    # output

    def emit(self):
        nodes = {}
        self._emit(self.outer, nodes)
        return nodes

    def _emit(self, scope, nodes):
        reached, entered = scope.reached, self.entered
        for name, nd in scope.order:
            if name in reached:
                node = self._node(scope, nd, name)
                nodes[node.name] = node
                for child in scope.children.get(name, ()):
                    if id(child) in entered:
                        self._emit(child, nodes)
            else:
                child = scope.calls.get(name)
                if child is not None and id(child) in entered:
                    self._emit(child, nodes)

    def _node(self, scope, nd, name):
        data, control = [], []
        for tensor in nd.input:
            if tensor[:1] == "^":
                for target in self.control_targets(scope, tensor[1:]):
                    if target not in control:
                        control.append(target)
            else:
                flat = self.resolve(scope, tensor)
                if flat is not None:
                    data.append(flat)
        return lazy_node(self.flat_name(scope, name), nd.op, data, control, decode_node_def_attrs, nd, nd.device)


def _int(text):
    try:
        return int(text) if text else 0
    except ValueError:
        return 0
