"""Shape arithmetic the TensorFlow and ONNX shape followers share (pipeline.estimate.shapes, onnx_shapes)."""


def small(shape):
    count = 1
    for d in shape or []:
        count *= d
    return count <= 64


def ints_of(tv):
    try:
        values = tv.ints()
    except (TypeError, ValueError):
        return None
    if values is None:
        return None
    count = 1
    for d in tv.shape or []:
        count *= d
    if len(values) < count:  # TensorFlow repeats the last value to fill the tensor
        values = list(values) + [values[-1] if values else 0] * (count - len(values))
    return [int(v) for v in values]


def broadcast(a, b):
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    return [x if y == 1 else y for x, y in zip(a, b)]


def window(size, k, s, d, pad_total=None, same=True):
    """Output length of a conv/pool window: SAME (ceil) or VALID, or explicit total padding."""
    eff = (k - 1) * d + 1
    if pad_total is not None:
        return (size + pad_total - eff) // s + 1
    return -(-size // s) if same else (size - eff) // s + 1


def reshape_dims(first, target):
    if target is None:
        return None
    out = list(target)
    if -1 in out and first is not None:
        total = 1
        for d in first:
            total *= d
        rest = 1
        for d in out:
            if d != -1:
                rest *= d
        out[out.index(-1)] = total // rest if rest else 0
    return out
