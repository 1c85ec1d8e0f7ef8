"""The layers of the TensorRT engine a graph would build, counted as TensorRT runs them.

    layers = engine_layers(graph, input_shapes=None)   # [Layer(name="conv1/Conv2D", kind="conv", ...)]

TensorRT's builder fuses what the graph writes as several ops into one kernel, and the time of an
engine is the time of those kernels. This module makes the same groups from the graph view
(pipeline.graph), without TensorRT:

- a convolution or matrix product takes in the ops that follow it while each link has one consumer:
  its bias (BiasAdd, Add of a constant), batch norm (FusedBatchNorm, BatchNormalization, Mul/Add of
  constants), one residual Add of another tensor, and the activation (Relu, Relu6/Clip, Sigmoid, ...);
- a chain of element-wise ops with one consumer per link is one point-wise layer;
- a concatenation is done in place (its inputs write into one buffer): no layer;
- a Transpose is a reformat (a copy that changes layout); Reshape, Flatten and Squeeze are free;
- where the engine runs in fp16 or int8, the inputs and outputs are reformatted from and to fp32.

Each Layer carries its arithmetic (FLOPs, for batch 1), its weights (elements) and the activation
elements it reads and writes (batch 1). It is named by the op of the user's graph it starts from.
A layer whose shape could not be followed says so (``known: False``) and costs nothing.
"""

from dataclasses import dataclass, field
from math import prod

from pipeline.estimate.shapes import SKIP, tensor_key, tensor_shapes

CONV = frozenset(["Conv2D", "_FusedConv2D", "Conv", "Conv2DBackpropInput", "ConvTranspose", "Conv3D"])
DEPTHWISE = frozenset(["DepthwiseConv2dNative"])
MATMUL = frozenset(["MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Gemm"])
POOL = frozenset(["MaxPool", "AvgPool", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
REDUCE = frozenset(["Mean", "Sum", "Max", "Min", "Prod", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
CONCAT = frozenset(["ConcatV2", "Concat"])
REFORMAT = frozenset(["Transpose"])
FREE = frozenset(["Const", "Constant", "Placeholder", "PlaceholderWithDefault", "Identity", "Snapshot", "StopGradient",
                  "Reshape", "Flatten", "Squeeze", "Unsqueeze", "ExpandDims", "Shape", "StridedSlice", "Pack",
                  "Gather", "Dropout", "NoOp", "CheckNumerics", "PreventGradient",
                  "Pad", "PadV2", "MirrorPad", "VarHandleOp", "ReadVariableOp"]) | SKIP  # a Pad before a conv or pool is folded into it
ACTIVATION = frozenset(["Relu", "Relu6", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
                        "HardSwish", "Swish", "Softplus", "ClipByValue"])
NORM = frozenset(["BiasAdd", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "BatchNormalization"])
ARITH = frozenset(["Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "Max", "Min", "Pow",
                   "SquaredDifference", "AddN", "Sum"])
POINTWISE = ACTIVATION | NORM | ARITH | frozenset([
    "Rsqrt", "Sqrt", "Square", "Abs", "Neg", "Exp", "Log", "Cast", "Floor", "Erf", "Gelu", "Reciprocal", "Round",
    "Ceil", "Sign", "Softsign", "PRelu", "Mish", "Maximum", "Minimum"])
ANCHORS = ("conv", "depthwise", "matmul")
# FLOPs per output element of a point-wise op (an estimate: the kernel's arithmetic is not the cost)
_PER_ELEMENT = {"FusedBatchNorm": 2, "FusedBatchNormV2": 2, "FusedBatchNormV3": 2, "BatchNormalization": 2,
                "Sigmoid": 4, "Tanh": 4, "Swish": 5, "HardSwish": 4, "Elu": 4, "Selu": 4, "Gelu": 8, "Erf": 8,
                "Exp": 4, "Log": 4, "Softplus": 6}


@dataclass
class Layer:
    """One kernel of the engine: FLOPs, weights and activations per image (batch 1)."""

    name: str  # the op of the user's graph the layer starts from
    kind: str  # conv, depthwise, matmul, pool, pointwise, reduce, softmax, reformat, other
    ops: list = field(default_factory=list)  # the graph's ops TensorRT runs in it
    flops: float = 0.0
    weights: float = 0.0  # elements
    reads: float = 0.0  # activation elements read
    writes: float = 0.0  # activation elements written
    known: bool = True  # its shapes were followed
    per_batch: bool = True  # its activations scale with the batch

    def to_dict(self):
        return {"name": self.name, "kind": self.kind, "ops": list(self.ops), "flops": self.flops,
                "weights": self.weights, "reads": self.reads, "writes": self.writes, "known": self.known}


def _count(dims):
    return None if dims is None else prod(dims)  # prod: 1 * d0 * d1 ..., the same products a loop makes


def _kind(op):
    if op in CONV:
        return "conv"
    if op in DEPTHWISE:
        return "depthwise"
    if op in MATMUL:
        return "matmul"
    if op in POOL:
        return "pool"
    if op in REDUCE:
        return "reduce"
    if op in ("Softmax", "LogSoftmax"):
        return "softmax"
    if op in REFORMAT:
        return "reformat"
    if op in POINTWISE:
        return "pointwise"
    return "other"


def engine_layers(graph, input_shapes=None, precision="fp16"):
    """The engine's layers of ``graph`` (see the module doc), in the order the graph runs them."""
    order = _order(graph)
    shapes = tensor_shapes(graph, order, input_shapes)
    onnx = graph.kind == "onnx"
    if graph.kind == "tensorflow":
        def key(t):
            return t if ":" not in t and "^" not in t else tensor_key(graph, t)
    else:
        def key(t):
            return t
    links, outs, constant, users = _links(graph, order, key)
    for t in _outputs(graph, key):
        users[t] = users.get(t, 0) + 1  # a graph output is read by the caller
    layer_of = {}  # tensor key -> the open Layer whose output it is
    layers = []
    of, dims = shapes.of, shapes.dims  # of(t) is dims.get(t's key) for a non-empty t
    kinds = {}  # op -> _kind(op)
    anchors_or_pointwise = frozenset(ANCHORS + ("pointwise",))
    for node, keys, out in zip(order, links, outs):
        plain = onnx or (":" not in out and "^" not in out)  # out is its own key
        if (out if plain else key(out)) in constant:
            continue  # folded by the builder
        op = node.op
        if op in _NO_LAYER:
            if op in _PASS and node.inputs and node.inputs[0]:
                source = layer_of.get(keys[0])
                if source is not None and users.get(keys[0]) == 1:
                    layer_of[out] = source  # a pass-through keeps the chain open
            continue
        inputs = [t for t in node.inputs if t] if len(keys) != len(node.inputs) else node.inputs
        data, data_keys, const_keys = [], [], []
        for t, k in zip(inputs, keys):
            if k in constant:
                const_keys.append(k)
            else:
                data.append(t)
                data_keys.append(k)
        out_dims = dims.get(out) if out and plain else of(out)
        out_n = None if out_dims is None else prod(out_dims)  # _count inlined
        kind = kinds.get(op)
        if kind is None:
            kind = kinds[op] = _kind(op)
        if kind != "pointwise" or not data:
            target = None
        elif len(data) == 1:  # _fuse_into's answer for one activation input, without the call
            target = layer_of.get(data_keys[0])
            if target is not None and (users.get(data_keys[0]) != 1 or target.kind not in anchors_or_pointwise):
                target = None
        else:
            target = _fuse_into(node, kind, data, data_keys, layer_of, users)
        if target is not None:
            target.ops.append(op)
            if out_n is None:
                target.known = False
            else:
                target.flops += out_n * _PER_ELEMENT.get(op, 1)
                target.writes = out_n
            if len(data_keys) > 1:  # one input is the target's own output: no residual
                residual = [k for k in data_keys if layer_of.get(k) is not target]
                for k in residual:
                    n = _count(dims.get(k))
                    target.reads += n or 0
                if residual and target.kind in ANCHORS:
                    target.ops[-1] = op + " (residual)"
            if const_keys and op != "Reshape":  # += 0 of no constant left out: the same number, the same type
                target.weights += sum([_count(dims.get(k)) or 0 for k in const_keys])
            layer_of[out] = target
            continue
        layer = Layer(name=node.name, kind=kind, ops=[op])
        _measure(layer, node, shapes, data_keys, const_keys, out_n)
        layers.append(layer)
        layer_of[out] = layer
    if precision in ("fp16", "int8"):
        layers[:0] = [_reformat(graph, t, shapes, precision, "input") for t in graph.inputs]
        layers.extend(_reformat(graph, t, shapes, precision, "output") for t in graph.outputs)
    return layers


def _links(graph, order, key):
    """In one pass over ``order`` (producers first): each node's non-empty inputs' keys and its output's key (a
    200,000-node graph asks for them several times); the keys of the constant tensors: Const nodes, ONNX
    initializers, and any op all of whose inputs are constants (the frozen batch norm's ``rsqrt(var + eps) *
    gamma``: TensorRT folds it at build time); and {tensor key: number of consuming nodes}."""
    links, outs, users = [], [], {}
    constant = set(graph.initializers or {})
    tensorflow, onnx = graph.kind == "tensorflow", graph.kind == "onnx"
    append_keys, append_out, add_constant, count = links.append, outs.append, constant.add, users.get
    for node in order:
        inputs = node.inputs
        if tensorflow:  # key() inlined
            keys = [t if ":" not in t and "^" not in t else tensor_key(graph, t) for t in inputs if t] if inputs else []
        else:
            keys = [t for t in inputs if t]
        out = (key(node.outputs[0]) if node.outputs else node.name) if onnx else node.name
        append_keys(keys)
        append_out(out)
        op = node.op
        if op in _WEIGHTS:  # weights, frozen or in variables
            add_constant(out)
        elif keys and op not in _INPUTS and len(keys) == len(inputs) and not node.control_inputs:
            for k in keys:
                if k not in constant:
                    break
            else:
                add_constant(out)
                for extra in node.outputs[1:]:
                    add_constant(key(extra))
        for k in (keys if len(keys) < 2 else set(keys)):
            users[k] = count(k, 0) + 1
    return links, outs, constant, users


_NO_LAYER = FREE | CONCAT
# FREE ops that pass their first input through unchanged: a chain open before them stays open
_PASS = frozenset(["Identity", "Snapshot", "StopGradient", "Dropout"])


def _order(graph):
    """The nodes producers first: the file's order when it already is (graphs are written so; a 200,000-node
    graph saves the sort), else the graph's topological order."""
    nodes = graph.nodes
    seen = set()
    tensorflow = graph.kind == "tensorflow"
    produced = set(graph.initializers or ()) | set(graph.inputs)
    for name, node in nodes.items():
        for t in node.inputs:
            if not t:
                continue
            if tensorflow:
                source = t if ":" not in t and "^" not in t else t.lstrip("^").partition(":")[0]
                if source not in seen and source in nodes:
                    return graph.topological_order()
            elif t not in produced:
                return graph.topological_order()
        for c in node.control_inputs:
            if c not in seen and c in nodes:
                return graph.topological_order()
        seen.add(name)
        if not tensorflow:
            produced.update(node.outputs)
    return list(nodes.values())


def _fuse_into(node, kind, data, data_keys, layer_of, users):
    """The open layer this point-wise op joins, or None: its main input must come from a conv, matrix
    product or point-wise layer whose output only this op reads. ``data_keys``: the keys of ``data``."""
    if kind != "pointwise" or not data:
        return None
    for t, k in zip(data, data_keys):
        source = layer_of.get(k)
        if source is None or users.get(k) != 1:
            continue
        others = [x for x in data if x is not t]
        if source.kind in ANCHORS:
            if others and (node.op not in ("Add", "AddV2", "Sum", "AddN") or len(others) > 1 or
                           any(o.endswith(" (residual)") for o in source.ops)):
                continue  # one residual Add, nothing else with a second tensor
            return source
        if source.kind == "pointwise" and not others:
            return source
    return None


def _measure(layer, node, shapes, data, consts, out_n):
    """Fill a new layer's FLOPs, weights and activations from the op and its shapes. ``data``, ``consts``: the
    keys of its activation and constant inputs."""
    if out_n is None:
        layer.known = False
        return
    dims = shapes.dims
    layer.writes = out_n
    layer.reads = sum([_count(dims.get(k)) or 0 for k in data])
    layer.weights = sum([_count(dims.get(k)) or 0 for k in consts])
    op, kind = node.op, layer.kind
    first = dims.get(data[0]) if data else None
    if kind in ("conv", "depthwise"):
        kernel = shapes.of(node.inputs[1]) if len(node.inputs) > 1 else None
        if kernel is None:
            layer.known = False
            return
        if node.op in ("Conv", "ConvTranspose"):  # ONNX: [co, ci/group, kh, kw]
            per_output = _count(kernel[1:])
        elif kind == "depthwise":  # TF: [kh, kw, ci, multiplier]: each output reads kh*kw inputs
            per_output = kernel[0] * kernel[1]
        else:  # TF: [kh, kw, ci, co]
            per_output = _count(kernel[:-1])
        if node.op in ("Conv2DBackpropInput", "ConvTranspose"):
            layer.flops = 2.0 * (_count(first) or 0) * _count(kernel) / max(kernel[0] if
                                                                                          node.op == "ConvTranspose" else kernel[-1], 1)
        else:
            layer.flops = 2.0 * out_n * per_output
            if node.op == "Conv" and (node.attrs.get("group", 1) or 1) > 1:
                layer.kind = "depthwise" if node.attrs.get("group") == (first[1] if first else 0) else "conv"
    elif kind == "matmul":
        b = shapes.of(node.inputs[1])
        if b is None or first is None:
            layer.known = False
            return
        transposed = node.attrs.get("transA") if op == "Gemm" else (
            node.attrs.get("transpose_a") or node.attrs.get("adj_x"))
        k = first[-2] if transposed else first[-1]
        layer.flops = 2.0 * out_n * k
        if not consts and len(data) > 1:  # both operands are activations (attention): no weights
            layer.weights = 0
    elif kind in ("pool", "reduce"):
        layer.flops = float(layer.reads)
    elif kind == "softmax":
        layer.flops = 5.0 * out_n
    elif kind == "pointwise":
        layer.flops = float(out_n) * _PER_ELEMENT.get(op, 1)
    # reformat and other: bytes only


_WEIGHTS = frozenset(["Const", "Constant", "VarHandleOp", "VariableV2"])
_INPUTS = frozenset(["Placeholder", "PlaceholderWithDefault"])


def _outputs(graph, key):
    return [key(t) for t in graph.outputs]


def _reformat(graph, tensor, shapes, precision, where):
    """The copy TensorRT adds to turn an fp32 input into the engine's precision (or an output back)."""
    n = _count(shapes.of(tensor))
    layer = Layer(name="{} (reformat {} {})".format(tensor_key(graph, tensor), where, precision), kind="reformat",
                  ops=["Reformat"], reads=n or 0, writes=n or 0, known=n is not None)
    return layer
