"""Comparing outputs: one rule for "the same within tolerance", used by batch consistency, the
first-divergence search and the convert stage's diagnosis.

    diff(ref, got, atol, rtol) -> (max abs diff, max rel diff, any element over atol + rtol * |ref|)
    max_abs_diff(outputs_a, outputs_b) -> the largest |a - b| over lists of output arrays
    tolerance("fp16") -> (atol, rtol) for outputs computed at that precision
"""

# "The same within tolerance" per precision a model runs at: |got - ref| <= atol + rtol * |ref|,
# element-wise. fp32 is the bar for the same graph in two runtimes (TensorFlow vs ONNX Runtime,
# batch consistency); fp16 keeps about 3 significant digits (machine epsilon 9.8e-4), so 1e-2
# relative; int8 engines are calibrated approximations, judged by top-1 agreement first.
TOLERANCES = {"fp32": (1e-5, 1e-4), "fp16": (1e-3, 1e-2), "int8": (5e-2, 1e-1)}
ATOL, RTOL = TOLERANCES["fp32"]


def tolerance(precision):
    """(atol, rtol) for outputs computed at ``precision`` ("fp32", "fp16", "int8")."""
    try:
        return TOLERANCES[str(precision).lower()]
    except KeyError:
        from pipeline.errors import DeployError

        raise DeployError("precision {!r}: expected one of {}".format(precision, ", ".join(TOLERANCES))) from None


def finite(value):
    """JSON-ready: inf (outputs of different shapes or non-numeric values that differ) becomes None."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return None if isinstance(value, float) and value in (float("inf"), float("-inf")) else value


def diff(ref, got, atol, rtol):
    """(max abs diff, max rel diff, any element over tolerance) of ``got`` against ``ref`` (same shape)."""
    import numpy as np

    ref, got = np.atleast_1d(ref), np.atleast_1d(got)
    if ref.dtype.kind not in "biuf" or got.dtype.kind not in "biuf":  # strings and the like: equal or not
        return (0.0, 0.0, False) if np.array_equal(ref, got) else (float("inf"), float("inf"), True)
    if ref.size == 0:
        return 0.0, 0.0, False
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    d, nan = np.abs(got - ref), np.isnan(ref) | np.isnan(got)
    d[nan] = np.where(np.isnan(ref) & np.isnan(got), 0.0, np.inf)[nan]  # NaN in both runs: the same
    ref = np.abs(np.nan_to_num(ref))
    return float(d.max()), float((d / np.maximum(ref, max(atol, 1e-12))).max()), bool(np.any(d > atol + rtol * ref))


def batched(alone, batched, size):
    return alone.ndim >= 1 and batched.ndim == alone.ndim and alone.shape[0] == 1 and batched.shape[0] == size \
        and alone.shape[1:] == batched.shape[1:]


def max_abs_diff(a, b):
    """The largest element-wise |a - b| over two lists of output arrays (rewrite's per-pass check)."""
    import numpy as np

    return max((float(np.max(np.abs(np.asarray(x, "float64") - np.asarray(y, "float64")))) if np.size(x) else 0.0
                for x, y in zip(a, b)), default=0.0)


def compare_outputs(reference, candidate, images, precision="fp32", batch=8):
    """``candidate`` (e.g. a TensorRT engine) against ``reference`` (e.g. ONNX Runtime) on ``images``, in
    batches: the max abs diff per output, whether all are within ``precision``'s tolerance, and the
    top-1 agreement of the first output when it is (batch, classes). What fp16 and int8 cost."""
    import numpy as np

    atol, rtol = tolerance(precision)
    name = reference.inputs[0][0]
    per_output = [0.0] * len(reference.output_names)
    within, agree, total = True, 0, 0
    for start in range(0, len(images), batch):
        chunk = np.asarray(images[start:start + batch], dtype=np.float32)
        ref, got = reference.run({name: chunk}), candidate.run({name: chunk})
        for i, (r, g) in enumerate(zip(ref, got)):
            r, g = np.asarray(r), np.asarray(g)
            if r.shape != g.shape:
                per_output[i], within = float("inf"), False
                continue
            d, _, over = diff(r, g, atol, rtol)
            per_output[i], within = max(per_output[i], d), within and not over
        first_r, first_g = np.asarray(ref[0]), np.asarray(got[0])
        if first_r.ndim == 2 and first_r.shape == first_g.shape and first_r.shape[1] > 1:
            agree += int((first_r.argmax(1) == first_g.argmax(1)).sum())
            total += len(first_r)
    return finite({
        "max_abs_diff": max(per_output) if per_output else 0.0,
        "outputs": dict(zip(reference.output_names, per_output)),
        "within_tolerance": within, "tolerance": {"atol": atol, "rtol": rtol, "precision": precision},
        "top1_agreement": agree / total if total else None,
    })
