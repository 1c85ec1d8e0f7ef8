"""Comparing outputs: one rule for "the same within tolerance", used by batch consistency, the
first-divergence search, the convert stage's comparison, rewrite's per-pass check and the benchmark's
accuracy check.

    compare_runs(reference, candidate, images, atol, rtol) -> per-output max/mean |diff|, finite, top-1
    compare_outputs(reference, candidate, images, "fp16") -> the benchmark's accuracy report
    compare_arrays(outputs_a, outputs_b, atol, rtol) -> one run's outputs against another's (the verdict)

    diff(ref, got, atol, rtol) -> (max abs diff, max rel diff, any element over atol + rtol * |ref|)
    tolerance("fp16") -> (atol, rtol) for outputs computed at that precision

``compare_outputs`` is ``compare_runs`` at a precision's tolerance; ``compare_runs`` judges each batch
with ``compare_arrays``, which applies ``diff`` to each output. A check whose config gives one
absolute tolerance ("max abs difference", stages.convert.tolerance, stages.rewrite.tolerance) passes
it as atol with rtol 0.
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


def compare_arrays(reference, candidate, atol, rtol):
    """Two runs' outputs (lists of arrays, in the same order) under ``diff``'s rule: per output its max
    |ref - got| (inf when the shapes differ), the sum and count of |ref - got| (for a mean) and whether
    every value of both is finite; overall the max and whether every element is within
    atol + rtol * |ref|. The verdict of "the same outputs" for every comparison: ``compare_runs`` per
    batch, rewrite's per-pass check on the outputs before and after a pass."""
    import numpy as np

    outputs, within = [], True
    for ref, got in zip(reference, candidate):
        ref, got = np.asarray(ref), np.asarray(got)
        numeric = ref.dtype.kind in "biuf" and got.dtype.kind in "biuf"
        is_finite = not numeric or bool(np.isfinite(ref).all() and np.isfinite(got).all())
        if ref.shape != got.shape:
            outputs.append({"max_abs_diff": float("inf"), "sum_abs_diff": float("inf"), "size": 0, "finite": is_finite})
            within = False
            continue
        worst, _, over = diff(ref, got, atol, rtol)
        total, size = 0.0, 0
        if numeric and ref.size:
            total, size = float(np.abs(ref.astype(np.float64) - got.astype(np.float64)).sum()), int(ref.size)
        outputs.append({"max_abs_diff": worst, "sum_abs_diff": total, "size": size, "finite": is_finite})
        within = within and not over
    return {"outputs": outputs, "max_abs_diff": max((o["max_abs_diff"] for o in outputs), default=0.0),
            "within_tolerance": within, "finite": all(o["finite"] for o in outputs)}


def compare_runs(reference, candidate, images, atol, rtol, batch=8):
    """Run ``reference`` and ``candidate`` (sessions: ``inputs``, ``output_names``, ``run``) on ``images``, each
    fed through its own first input, in batches of ``batch``; per output the max and mean |ref - got|
    (``compare_arrays`` on each batch), whether all are within atol + rtol * |ref|, whether every output
    value of both runs is finite, and the first output's top-1 agreement (agreeing, total) when it is
    (batch, classes). The one
    comparison of two runtimes' outputs (convert: TensorFlow vs ONNX Runtime; benchmark: engine vs ONNX Runtime)."""
    import numpy as np

    ref_name, got_name = reference.inputs[0][0], candidate.inputs[0][0]
    count = len(reference.output_names)
    worst, sums, sizes = [0.0] * count, [0.0] * count, [0] * count
    within, finite_all, agree, total = True, True, 0, 0
    for start in range(0, len(images), batch):
        chunk = np.asarray(images[start:start + batch], dtype=np.float32)
        ref, got = reference.run({ref_name: chunk}), candidate.run({got_name: chunk})
        found = compare_arrays(ref, got, atol, rtol)
        within, finite_all = within and found["within_tolerance"], finite_all and found["finite"]
        for i, o in enumerate(found["outputs"]):
            worst[i] = max(worst[i], o["max_abs_diff"])
            sums[i], sizes[i] = sums[i] + o["sum_abs_diff"], sizes[i] + o["size"]
        first_r, first_g = np.asarray(ref[0]), np.asarray(got[0])
        if first_r.ndim == 2 and first_r.shape == first_g.shape and first_r.shape[1] > 1:
            agree += int((first_r.argmax(1) == first_g.argmax(1)).sum())
            total += len(first_r)
    outputs = {name: {"max_abs_diff": worst[i], "mean_abs_diff": sums[i] / sizes[i] if sizes[i] else worst[i]}
               for i, name in enumerate(reference.output_names)}
    return {"outputs": outputs, "max_abs_diff": max(worst) if worst else 0.0, "within_tolerance": within,
            "finite": finite_all, "top1": (agree, total)}


def compare_outputs(reference, candidate, images, precision="fp32", batch=8):
    """``candidate`` (e.g. a TensorRT engine) against ``reference`` (e.g. ONNX Runtime) on ``images``, in
    batches (``compare_runs``): the max abs diff per output, whether all are within ``precision``'s
    tolerance, and the top-1 agreement of the first output when it is (batch, classes). What fp16 and
    int8 cost."""
    atol, rtol = tolerance(precision)
    found = compare_runs(reference, candidate, images, atol, rtol, batch=batch)
    agree, total = found["top1"]
    return finite({
        "max_abs_diff": found["max_abs_diff"],
        "outputs": {name: v["max_abs_diff"] for name, v in found["outputs"].items()},
        "within_tolerance": found["within_tolerance"], "tolerance": {"atol": atol, "rtol": rtol, "precision": precision},
        "top1_agreement": agree / total if total else None,
    })
