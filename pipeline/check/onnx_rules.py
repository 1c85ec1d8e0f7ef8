"""Every node, every tensor of an ONNX model against the target's TensorRT ONNX parser.

    findings = onnx_findings(model, table, target, plugins=plugins, known_plugins=known_plugins)

``model`` is an ``onnx.ModelProto`` (a .onnx file, or the real tf2onnx output of a TensorFlow graph).
ONNX shape/type inference (``onnx.shape_inference.infer_shapes(model, data_prop=True)``) gives every
tensor its type and rank; when it fails, a warning says so and the checks use what the file states.
Then, for every node of the graph and of every If/Loop/Scan body (named by path, ``If_3/then_branch/Foo``):

- the opset range of the target (``onnx.max_opset``/``onnx.min_opset``; below opset 7 the parser
  itself says a model is "not guaranteed to work");
- each input and output type against the op's types for the table's TensorRT version (the op's data
  type: the ONNX schema's type variable of its first input; index, shape and axes inputs are not the
  op's data), with the parser's conversions (INT64 -> INT32 and DOUBLE -> FLOAT on 8.x: ``cast_down``);
  STRING, sequence and optional tensors exist in no TensorRT version; INT8 (FP8, INT4) only through
  QuantizeLinear/DequantizeLinear (``quantized_types``); UINT8 only as a network input/output where the
  version has it (``io_only_types``); a type the parser has no mapping for (BF16 on 8.x) is refused;
- the restrictions the table restates for checkers: ``const_inputs`` (an initializer, or a Constant
  node's output: the parser's weights), ``spatial_dims`` against the inferred rank, ``input_rank``,
  ``unsupported_outputs`` (MaxPool's Indices), ``unsupported_attributes``;
- inside bodies, the op support, plugin and attribute checks routes.check_onnx_model makes for the
  top-level nodes.

The rules live in three modules: this one (the walk over graphs and bodies, opset range, op support,
plugins, attributes, restrictions), onnx_dtypes (the type rules, a mixin of the walker) and
onnx_types (what the model says of its values: types, scopes, schemas, inference, loading).
``onnx_batch.batch_reductions(model)`` is the ONNX half of batch semantics: which tensors carry the
batch, from the graph inputs through the graph; a reduction is batch-dependent only when it reduces
that axis.
"""

from collections import OrderedDict

from pipeline.check.findings import Finding
from pipeline.check.onnx_dtypes import TypeRules
from pipeline.check.onnx_types import STANDARD, Scope, default_opset, infer, schema_of

# parser's own lower bound: ModelImporter.cpp warns "Models using older opsets are not guaranteed to work"
PARSER_MIN_OPSET = 7

# ------------------------------------------------------------------------------ the check


class _Collector:
    """Findings grouped by (kind, op, key): one finding per problem, naming every node it hits."""

    def __init__(self):
        self.groups = OrderedDict()

    def add(self, severity, kind, op, key, node, detail, cause, fix, rewrite=None):
        group = self.groups.get((kind, op, key))
        if group is None:
            self.groups[(kind, op, key)] = group = {"severity": severity, "nodes": [], "details": [], "cause": cause,
                                                    "fix": fix, "rewrite": rewrite}
        if node not in group["nodes"]:
            group["nodes"].append(node)
            group["details"].append(detail)

    def findings(self):
        out = []
        for (kind, op, _), g in self.groups.items():
            cause = g["cause"]
            more = len(g["nodes"]) - 1
            if more > 0:
                cause += " (and {} more node{})".format(more, "s" if more > 1 else "")
            out.append(Finding(g["severity"], "onnx", kind, op, list(g["nodes"]), cause, g["fix"], g["rewrite"]))
        return out


def onnx_findings(model, table, target, plugins=None, known_plugins=frozenset(), top_level=False):
    """Findings for ``model`` on ``table``'s parser for ``target`` (see the module doc).

    ``top_level``: also check op support, plugins and attribute values of the main graph's nodes
    (routes.check_onnx_model does that itself; the bodies of If/Loop/Scan are always checked here)."""
    plugins = plugins or {}
    opset = default_opset(model)
    out = _Collector()
    findings = _opset_findings(opset, target)
    inferred, problem = infer(model)
    if problem:
        findings.append(Finding(
            "warning", "onnx", "inference", None, [],
            "ONNX shape inference failed ({}): tensor types and ranks are checked only where the file states "
            "them".format(problem),
            "run onnx.checker.check_model(model, full_check=True) to find the inconsistent node, and export again"))
    rules = _Rules(table, target, opset or 0, plugins, known_plugins, out)
    rules.graph(inferred.graph, None, "", main=True, top_level=top_level)
    return findings + out.findings()


def padded_output_text(where, parser, shape):
    """(cause, fix) of an op whose data-dependent output the parser pads to ``shape`` (the table's padded_output:
    NonMaxSuppression on TensorRT 8.2), accepted but wrong: what reads it sees padding rows."""
    return ("{}: the {} parser pads its output to a fixed {} (operators.md; experimental there), where ONNX and "
            "TensorFlow return only the selected boxes: what reads it sees the padding rows as boxes".format(
                where, parser, shape),
            "use TensorRT's EfficientNMS_TRT plugin, whose outputs are padded by design and carry the number of "
            "detections (deploy rewrite MODEL.onnx --pass replace_nms_with_plugin; it changes the graph's outputs), or "
            "a target whose TensorRT (8.5 on) imports NonMaxSuppression with its data-dependent shape")


def _runtime(target):
    return "TensorRT {}".format(target.tensorrt) if target.tensorrt else "ONNX Runtime"


def _opset_findings(opset, target):
    if opset is None:
        return []
    if opset > target.max_opset:
        return [Finding(
            "blocker", "onnx", "opset", None, [],
            "the model is at ONNX opset {}; {} parses up to opset {}".format(opset, _runtime(target), target.max_opset),
            "convert again at opset {} (deploy's convert stage picks it for the target; tf2onnx --opset {}), "
            "or lower it (rewrite lower_opset)".format(target.max_opset, target.max_opset), "lower_opset")]
    low = target.min_opset or (PARSER_MIN_OPSET if target.tensorrt else None)
    if low is not None and opset < low:
        said = ("{}'s range is opset {} to {}".format(target.name, target.min_opset, target.max_opset)
                if target.min_opset else "the TensorRT ONNX parser supports opset {} and later (older models are "
                                         "'not guaranteed to work')".format(PARSER_MIN_OPSET))
        return [Finding(
            "blocker", "onnx", "opset", None, [],
            "the model is at ONNX opset {}; {}".format(opset, said),
            "re-export at opset >= {} (tf2onnx --opset {}; torch.onnx.export(opset_version={}))".format(
                low, target.max_opset, target.max_opset))]
    return []


def _from_tf_loop(body):
    """Whether a Loop body is tf2onnx's conversion of a TensorFlow while loop (a Keras recurrent layer):
    its nodes keep the TF names (``.../while/...``) or are TensorList ops tf2onnx left unconverted."""
    return body is not None and any("/while/" in n.name or n.op_type.startswith("TensorList") for n in body.node)


def _recurrent_fix(op, in_tf_loop):
    """The control_flow family's fix (Keras ``LSTM/GRU/SimpleRNN(unroll=True)`` over a fixed sequence
    length; ``tf.compat.v1.nn.static_rnn`` in TF 1.x) for an op of a TensorFlow loop, else None."""
    from pipeline.targets.families import families, family_of

    family = family_of(op)
    if not in_tf_loop and (family is None or family.name != "control_flow"):
        return None
    family = next(f for f in families() if f.name == "control_flow")
    return family.fix.format(boundary="the loop")


class _Rules(TypeRules):
    def __init__(self, table, target, opset, plugins, known_plugins, out):
        self.table, self.target, self.opset = table, target, opset
        self.plugins, self.known_plugins, self.out = plugins, known_plugins, out
        self.version = _runtime(target)
        self.typed = target.tensorrt is not None and table.io_types is not None
        self.io = set(table.io_types or ())
        self.cast_down = dict(table.cast_down or {})
        self.quantized = set(table.quantized_types or ())
        self.io_only = set(table.io_only_types or ())
        self.types_cache = {}
        self.tf_loop = False  # walking the body of a Loop tf2onnx made from a TensorFlow while loop

    # -- graphs ------------------------------------------------------------------------------------

    def graph(self, graph, outer, prefix, main=False, top_level=False):
        import onnx

        scope = Scope(graph, outer)
        if main:
            self.io_names = {i.name for i in graph.input} | {o.name for o in graph.output}
            for info in graph.input:
                if info.name not in scope.initializers:
                    self.check_input(info, scope)
        names = {}
        for index, node in enumerate(graph.node):
            name = node.name or "{}_{}".format(node.op_type, index)
            if name in names:
                name = "{}_{}".format(name, index)
            names[name] = True
            path = prefix + name
            self.node(node, path, scope, check_op=not main or top_level)
            outer_loop = self.tf_loop
            for attr in node.attribute:
                self.tf_loop = outer_loop or (node.op_type == "Loop" and _from_tf_loop(attr.g))
                if attr.type == onnx.AttributeProto.GRAPH:
                    self.graph(attr.g, scope, "{}/{}/".format(path, attr.name))
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for i, g in enumerate(attr.graphs):
                        self.graph(g, scope, "{}/{}[{}]/".format(path, attr.name, i))
            self.tf_loop = outer_loop

    def node(self, node, path, scope, check_op):
        op, table = node.op_type, self.table
        standard = node.domain in STANDARD
        if check_op and not self._op_supported(node, path):
            return
        entry = table.lookup(op) if standard else None
        if check_op and entry is not None and entry.supported:
            self._attributes(node, path, entry, check_values=True)
        elif entry is not None and entry.supported:
            self._attributes(node, path, entry, check_values=False)
        if entry is not None and entry.supported:
            self._restrictions(node, path, scope, entry)
        self.check_types(node, path, scope, entry if standard else None)

    def _op_supported(self, node, path):
        op = node.op_type
        standard = node.domain in STANDARD
        if standard and self.table.is_supported(op):
            return True
        if op in self.known_plugins:
            present = self.plugins.get(op)
            if present:
                self.out.add("info", "plugin", op, "plugin", path, "",
                             "TensorRT plugin {} (in {}'s plugin library)".format(op, self.version),
                             "nothing to do: the parser maps it to the plugin")
            else:
                self.out.add("blocker", "plugin", op, "plugin", path, "",
                             "TensorRT plugin {} is not in {}'s plugin library ({})".format(op, self.version, path),
                             "use a plugin the target has, build and load this plugin on the device, or run it on "
                             "the CPU")
            return False
        if not standard:
            self.out.add("blocker", "custom_op", op, "custom", path, "",
                         "custom op {}::{} at {}: TensorRT needs a plugin registered under the name {}".format(
                             node.domain, op, path, op),
                         "write and load a TensorRT plugin named {}, or replace the op before conversion".format(op))
            return False
        entry = self.table.lookup(op)
        reason = getattr(entry, "reason", None)
        recurrent = _recurrent_fix(op, self.tf_loop)
        self.out.add("blocker", "unsupported_op", op, "op", path, "",
                     "{} at {} (inside a subgraph body{}): the {} ONNX parser does not support {}{}".format(
                         op, path, " converted from a TensorFlow while loop" if recurrent else "", self.version, op,
                         ": " + reason if reason else ""),
                     recurrent or "replace {} with supported ops, or move it out of the If/Loop/Scan body".format(op))
        return False

    def _attributes(self, node, path, entry, check_values):
        from onnx import helper

        values = {a.name: a for a in node.attribute}
        for attr in entry.unsupported_attributes:
            if attr in values:
                self.out.add("blocker", "attribute", node.op_type, ("unsupported", attr), path, attr,
                             "{} {} sets attribute {}: {} does not support it".format(
                                 node.op_type, path, attr, self.version),
                             "remove the attribute (e.g. give Constant a `value` tensor instead)")
        if not check_values:
            return
        for attr, allowed in entry.attributes.items():
            if attr not in values:
                continue
            value = helper.get_attribute_value(values[attr])
            value = value.decode() if isinstance(value, bytes) else value
            if allowed and str(value) not in [str(a) for a in allowed]:
                self.out.add("blocker", "attribute", node.op_type, ("value", attr, str(value)), path, attr,
                             "{} {}={!r} at {}: {} supports {}".format(node.op_type, attr, value, path, self.version,
                                                                        ", ".join(map(str, allowed))),
                             "change the attribute before conversion")

    def _restrictions(self, node, path, scope, entry):
        op = node.op_type
        if entry.padded_output and node.output and node.output[0]:
            cause, fix = padded_output_text("{} {}".format(op, path), self.version, entry.padded_output)
            self.out.add("warning", "accepted_but_wrong", op, "padded", path, node.output[0], cause, fix)
        for index, name in sorted(entry.const_inputs.items()):
            index = index if index >= 0 else len(node.input) + index
            if index >= len(node.input) or not node.input[index]:
                continue
            tensor = node.input[index]
            if not scope.is_weights(tensor):
                producer = scope.producer(tensor)
                self.out.add("blocker", "restriction", op, ("const", index), path, tensor,
                             "{} {}: input {} ({}) is {}, not an initializer; the {} parser needs `{}` as an "
                             "initializer (or a Constant node)".format(
                                 op, path, index, name, "computed by {} {}".format(producer.op_type, producer.name)
                                 if producer is not None else "a graph input" if tensor in self.io_names
                                 else "computed at run time", self.version, name),
                             "fold it to a constant before conversion (onnxsim / polygraphy surgeon sanitize "
                             "--fold-constants), or export with a constant {}".format(name))
        data = node.input[0] if node.input else ""
        rank = scope.rank(data) if data else None
        if entry.spatial_dims and rank is not None and rank - 2 not in entry.spatial_dims:
            self.out.add("blocker", "restriction", op, ("spatial", rank - 2), path, data,
                         "{} {}: input {} has {} spatial dimension(s) (rank {}); the {} parser takes {} only".format(
                             op, path, data, rank - 2, rank, self.version,
                             " or ".join("{}D".format(d) for d in entry.spatial_dims)),
                         "reshape to a supported rank around the op (e.g. 1D -> 2D with Unsqueeze), or replace it")
        if entry.input_rank is not None and rank is not None and not entry.input_rank.min <= rank <= entry.input_rank.max:
            self.out.add("blocker", "restriction", op, ("rank", rank), path, data,
                         "{} {}: input {} has rank {}; the {} parser takes rank {}..{}".format(
                             op, path, data, rank, self.version, entry.input_rank.min, entry.input_rank.max),
                         "reshape around the op to a supported rank")
        if entry.unsupported_outputs:
            schema = schema_of(op, node.domain, self.opset)
            names = [p.name for p in schema.outputs] if schema is not None else []
            for index, tensor in enumerate(node.output):
                if tensor and index < len(names) and names[index] in entry.unsupported_outputs:
                    self.out.add("blocker", "restriction", op, ("output", names[index]), path, tensor,
                                 "{} {}: output {} ({}) is not produced by the {} parser".format(
                                     op, path, index, names[index], self.version),
                                 "drop the {} output (export without it, e.g. return_indices=False)".format(
                                     names[index]))

    # -- types --------------------------------------------------------------------------------------
