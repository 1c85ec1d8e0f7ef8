"""ONNX tensors' shapes (NCHW), for pipeline.estimate.shapes: one ``infer_onnx(shapes, node)`` per node."""

from pipeline.estimate.shape_ops import broadcast, ints_of, reshape_dims, small


_ONNX_SAME = frozenset([
    "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish", "Softplus",
    "Softsign", "Softmax", "LogSoftmax", "BatchNormalization", "Identity", "Cast", "Sqrt", "Reciprocal", "Neg",
    "Abs", "Exp", "Log", "Erf", "Floor", "Ceil", "Round", "Dropout", "LRN", "InstanceNormalization", "PRelu",
    "Gelu", "Mish", "QuantizeLinear", "DequantizeLinear",
])
_ONNX_BINARY = frozenset(["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sum"])


def infer_onnx(shapes, node):
    op, ins, dims = node.op, node.inputs, shapes.dims
    out = node.outputs[0] if node.outputs else None
    if out is None:
        return
    first = shapes.of(ins[0]) if ins else None
    attrs = node.attrs
    if op == "Constant":
        value = attrs.get("value")
        if value is not None:
            dims[out] = list(value.shape)
            if value.dtype in ("int32", "int64") and small(value.shape):
                shapes.ints[out] = ints_of(value)
        return
    if op in _ONNX_SAME:
        dims[out] = first
        if op in ("Identity", "Cast"):
            shapes.ints[out] = shapes.value(ins[0])
    elif op in _ONNX_BINARY:
        shape = first
        for t in ins[1:]:
            shape = broadcast(shape, shapes.of(t))
        dims[out] = shape
    elif op in ("Conv", "MaxPool", "AveragePool"):
        dims[out] = _onnx_window(shapes, node, first, attrs)
    elif op in ("GlobalAveragePool", "GlobalMaxPool"):
        dims[out] = list(first[:2]) + [1] * (len(first) - 2)
    elif op == "Gemm":
        b = shapes.of(ins[1])
        m = first[1] if attrs.get("transA") else first[0]
        n = b[0] if attrs.get("transB") else b[1]
        dims[out] = [m, n]
    elif op == "MatMul":
        b = shapes.of(ins[1])
        dims[out] = list(first[:-1]) + [b[-1]] if len(b) > 1 else list(first[:-1])
    elif op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"):
        axes = attrs.get("axes") or (shapes.value(ins[1]) if len(ins) > 1 else None) or list(range(len(first)))
        axes = [a % len(first) for a in axes]
        keep = attrs.get("keepdims", 1)
        dims[out] = [1 if i in axes else d for i, d in enumerate(first)] if keep else \
            [d for i, d in enumerate(first) if i not in axes]
    elif op == "Concat":
        parts = [shapes.of(t) for t in ins]
        axis = attrs.get("axis", 0) % len(parts[0])
        if all(shapes.value(t) is not None for t in ins):
            shapes.ints[out] = [v for t in ins for v in shapes.value(t)]
        shape = list(parts[0])
        shape[axis] = sum(p[axis] for p in parts)
        dims[out] = shape
    elif op == "Flatten":
        axis = attrs.get("axis", 1) % len(first)
        lead = 1
        for d in first[:axis]:
            lead *= d
        rest = 1
        for d in first[axis:]:
            rest *= d
        dims[out] = [lead, rest]
    elif op == "Reshape":
        target = shapes.value(ins[1])
        if target is not None and not attrs.get("allowzero"):
            target = [first[i] if d == 0 else d for i, d in enumerate(target)]
        dims[out] = reshape_dims(first, target)
    elif op == "Transpose":
        perm = attrs.get("perm") or list(reversed(range(len(first))))
        dims[out] = [first[p] for p in perm]
    elif op in ("Squeeze", "Unsqueeze"):
        axes = attrs.get("axes") or (shapes.value(ins[1]) if len(ins) > 1 else None)
        if op == "Squeeze":
            axes = [a % len(first) for a in axes] if axes else [i for i, d in enumerate(first) if d == 1]
            dims[out] = [d for i, d in enumerate(first) if i not in axes]
        else:
            shape = list(first)
            for a in sorted(a % (len(first) + len(axes)) for a in axes):
                shape.insert(a, 1)
            dims[out] = shape
            if shapes.value(ins[0]) is not None and first == []:
                shapes.ints[out] = shapes.value(ins[0])
    elif op == "Pad":
        pads = attrs.get("pads") or shapes.value(ins[1])
        n = len(first)
        dims[out] = [d + pads[i] + pads[i + n] for i, d in enumerate(first)]
    elif op == "Shape":
        dims[out] = [len(first)]
        shapes.ints[out] = list(first)
    elif op == "Gather":
        values, index = shapes.value(ins[0]), shapes.value(ins[1])
        if values is not None and index is not None:
            shapes.ints[out] = [values[i] for i in index]
            dims[out] = [] if shapes.of(ins[1]) == [] else [len(index)]
    elif op in ("Resize", "Upsample"):
        sizes = shapes.value(ins[3]) if len(ins) > 3 else None
        dims[out] = sizes


def _onnx_window(shapes, node, first, attrs):
    spatial = len(first) - 2
    if node.op == "Conv":
        kernel = shapes.of(node.inputs[1])
        k, channels = kernel[2:], kernel[0]
    else:
        k, channels = attrs.get("kernel_shape"), first[1]
    strides = attrs.get("strides") or [1] * spatial
    dilations = attrs.get("dilations") or [1] * spatial
    pads = attrs.get("pads") or [0] * (2 * spatial)
    auto = attrs.get("auto_pad", "NOTSET")
    ceil = attrs.get("ceil_mode", 0)
    out = [first[0], channels]
    for j in range(spatial):
        size = first[2 + j]
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-size // strides[j]))
            continue
        if auto == "VALID":
            pads_j = 0
        else:
            pads_j = pads[j] + pads[j + spatial]
        eff = (k[j] - 1) * dilations[j] + 1
        span = size + pads_j - eff
        out.append((-(-span // strides[j]) if ceil else span // strides[j]) + 1)
    return out
