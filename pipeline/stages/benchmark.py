"""The benchmark stage: latency and throughput of the converted ONNX model, per batch size.

Today it runs on ONNX Runtime's CPU provider on the machine running deploy, and says so in
``benchmark.json`` ("where"): host numbers are never reported as target (Jetson) numbers. A
TensorRT backend on the target will plug into ``pipeline.backends`` later.
"""

import functools
import hashlib
import json

from pipeline.errors import DeployError, StageFailed
from pipeline.files import onnx_file
from pipeline.stages import stage

SEED = 0
INPUT_RANGE = (0.0, 255.0)
KEY = "stages.benchmark"


@stage(
    "benchmark",
    inputs={"onnx": "convert", "engine": "engine"},
    optional=("engine",),
    outputs={"benchmark": "benchmark.json"},
    version=3,
    uses=("target", "dataset", "device"),
    tools=("onnxruntime", "numpy"),
)
def benchmark(ctx):
    """Measure latency and throughput of the model for each batch size (on the device when configured)."""
    if getattr(ctx.config, "device", None) is not None:
        return _on_device(ctx)
    from pipeline.bench.latency import measure, summarize
    from pipeline.backends import load_onnx

    opts = ctx.options
    batch_sizes = list(opts.batch_sizes)

    model_path = onnx_file(ctx.inputs["onnx"])
    session = load_onnx(model_path)
    for bs in batch_sizes:  # fail on a bad batch size before spending time measuring
        _check_batch(session, bs)

    requested = opts.inputs
    label = dict(session.label)
    where_short = _where_short(label)
    results = []
    for bs in batch_sizes:
        feed, used = _feed(ctx, session, bs, requested)
        run_once = functools.partial(session.run, feed)
        try:
            run_once()  # one checked call: a shape/type error becomes a one-line message
        except Exception as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            raise StageFailed(f"benchmark: {model_path.name} failed at batch size {bs}: {reason}") from None

        total = None if opts.duration_s is not None else opts.iterations
        with ctx.progress.bar(total=total, desc=f"benchmark b{bs}", unit="it") as bar:
            times = measure(
                run_once,
                warmup=opts.warmup,
                iterations=opts.iterations,
                duration_s=opts.duration_s,
                progress_bar=bar,
            )
        stats = summarize(times, bs)
        results.append({"batch_size": bs, **stats})
        ctx.progress.log(
            f"benchmark: batch {bs}: p50 {stats['p50_ms']:.3f} ms, p99 {stats['p99_ms']:.3f} ms,"
            f" {_fmt(stats['throughput_ips'])} img/s ({stats['iterations']} it, {where_short})"
        )

    on_target = _on_target_device(label, ctx.target)
    where = {
        **label,
        "target": getattr(ctx.target, "name", None),
        "target_runtime": getattr(ctx.target, "runtime", None),
        "on_target_device": on_target,
    }
    if not on_target:
        where["note"] = _note(label)

    report = {
        "where": where,
        "model": {
            "name": model_path.name,
            "sha256": _sha256(model_path),
            "bytes": model_path.stat().st_size,
            "inputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in session.inputs],
        },
        "settings": {
            "batch_sizes": batch_sizes,
            "warmup": opts.warmup,
            "mode": "iterations" if opts.duration_s is None else "duration",
            "iterations": opts.iterations,
            "duration_s": opts.duration_s,
            "inputs": used,
            "inputs_requested": requested,
            "seed": SEED,
            "input_range": list(INPUT_RANGE),
        },
        "results": results,
    }
    return _finish(ctx, report, session, model_path, where_short, results)


def _on_device(ctx):
    """The same report, measured by the device agent (pipeline.device.benchmark)."""
    from pipeline.data.dataset import dataset_samples
    from pipeline.device.benchmark import run_on_device

    opts = ctx.options
    run = run_on_device(ctx, dataset_samples, INPUT_RANGE, SEED)
    model_path, session = run["model"], run["session"]
    report = {
        "where": run["where"],
        "model": {"name": model_path.name, "sha256": _sha256(model_path), "bytes": model_path.stat().st_size,
                  "inputs": [{"name": n, "shape": None if s is None else list(s), "dtype": d} for n, s, d in session.inputs]},
        "settings": {
            "batch_sizes": list(opts.batch_sizes), "warmup": opts.warmup,
            "mode": "iterations" if opts.duration_s is None else "duration",
            "iterations": opts.iterations, "duration_s": opts.duration_s, "inputs": run["inputs_used"],
            "inputs_requested": opts.inputs, "seed": SEED, "input_range": list(INPUT_RANGE),
        },
        "results": run["results"],
    }
    if run["backend"] == "tensorrt":
        report["accuracy"] = _accuracy(ctx, session)
    return _finish(ctx, report, session, model_path, run["where_short"], run["results"])


def _accuracy(ctx, session):
    """The engine against the ONNX model on ONNX Runtime here, on dataset images: what fp16/int8 cost."""
    from pipeline.backends import load_onnx
    from pipeline.data.dataset import dataset_samples
    from pipeline.numeric import compare_outputs

    reference = load_onnx(onnx_file(ctx.inputs["onnx"]))
    shape = reference.inputs[0][1]
    images, source = dataset_samples(ctx.config, ctx.options.consistency_samples * 4, (shape[1], shape[2]))
    engine = ctx.config.stages.engine
    precision = engine.precision if engine is not None else "fp32"
    report = compare_outputs(reference, session, images, precision, batch=min(8, engine.max_batch_size if engine else 8))
    report["images"], report["source"] = len(images), source
    top1 = report["top1_agreement"]
    ctx.progress.log("benchmark: engine ({}) vs ONNX Runtime on {} images: max abs diff {}, top-1 agreement {}".format(
        precision, len(images), report["max_abs_diff"], "n/a" if top1 is None else "{:.1%}".format(top1)))
    return report


def _finish(ctx, report, session, model_path, where_short, results):
    consistency = _consistency(ctx, session, model_path, list(ctx.options.batch_sizes))
    if consistency is not None:
        report["consistency"] = consistency
    out = ctx.output("benchmark")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, sort_keys=True, allow_nan=False)
        f.write("\n")

    if consistency is not None and not consistency["passed"]:
        raise StageFailed("batch consistency: an image's output changes with the batch it is in (max abs diff {:.3g} "
                          "on {}); run deploy consistency on the frozen graph to find the layer".format(
                              max(o["max_abs_diff"] or 0 for o in consistency["outputs"]), where_short))
    p50 = ", ".join("{:.3g} ms @b{}".format(r["p50_ms"], r["batch_size"]) for r in results)
    return {
        "summary": "{}: p50 {}".format(where_short, p50),
        "where": where_short,
        "on_target_device": report["where"]["on_target_device"],
        "p50_ms": {str(r["batch_size"]): round(r["p50_ms"], 3) for r in results},
        "throughput_ips": {
            str(r["batch_size"]): None if r["throughput_ips"] is None else round(r["throughput_ips"], 1)
            for r in results
        },
    }


def _consistency(ctx, session, model_path, batch_sizes):
    """Each sample alone vs inside the benchmark's batches (sizes above 1) on the same runtime."""
    sizes = [b for b in batch_sizes if b > 1]
    if not getattr(ctx.options, "consistency", False) or not sizes:
        return None
    from pipeline.numeric.consistency import batch_consistency
    from pipeline.data.dataset import dataset_samples

    shape = session.inputs[0][1] if len(session.inputs) == 1 else None
    if shape is None or len(shape) != 4 or shape[3] != 3:
        return None
    images, source = dataset_samples(ctx.config, ctx.options.consistency_samples, (shape[1], shape[2]))
    report = batch_consistency(session, images, sizes, source=source, model=str(model_path))
    ctx.progress.log("benchmark: batch consistency {} on {} images ({})".format(
        "pass" if report.passed else "FAIL", len(images), source))
    return report.to_dict()


def _feed(ctx, session, batch_size, requested):
    """The input batch and where it came from: dataset images (repeated to fill the batch) or random."""
    if requested == "dataset" and len(session.inputs) == 1:
        import numpy as np

        from pipeline.data.dataset import dataset_samples

        name, shape, dtype = session.inputs[0]
        if len(shape or ()) == 4 and shape[3] == 3 and shape[1] and shape[2]:
            images, source = dataset_samples(ctx.config, batch_size, (shape[1], shape[2]))
            if source.startswith("dataset"):
                reps = -(-batch_size // len(images))
                batch = np.concatenate([images] * reps)[:batch_size].astype(dtype)
                return {name: batch}, "dataset"
    return random_feed(session.inputs, batch_size, seed=SEED), "random"


def random_feed(inputs, batch_size, seed=SEED):
    """``{name: array}`` for ``inputs`` [(name, shape, dtype)]: batch dim = ``batch_size``, values
    uniform in 0..255 from a fixed seed (cast to the input's dtype)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    feed = {}
    for name, shape, dtype in inputs:
        dims = _shape_for(name, shape, batch_size)
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            np_dtype = None
        if np_dtype is None or np_dtype.kind not in "fiub":
            raise DeployError(f"benchmark: model input '{name}' has type {dtype}; only numeric inputs are supported")
        data = rng.uniform(*INPUT_RANGE, size=dims).astype(np.float32)
        feed[name] = data if np_dtype == np.float32 else data.astype(np_dtype)
    return feed


def _shape_for(name, shape, batch_size):
    if not shape:
        raise DeployError(f"benchmark: model input '{name}' is a scalar; it has no batch dimension")
    rest = shape[1:]
    if any(d is None for d in rest):
        shown = "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
        raise DeployError(
            f"benchmark: model input '{name}' has dynamic non-batch dims {shown};"
            " export the model with a fixed input size to benchmark it"
        )
    return (batch_size, *rest)


def _check_batch(session, batch_size):
    for name, shape, _ in session.inputs:
        fixed = shape[0] if shape else None
        if fixed is not None and fixed != batch_size:
            raise DeployError(
                f"{KEY}.batch_sizes: the model's input '{name}' has a fixed batch dim of {fixed},"
                f" so it cannot run batch size {batch_size}; use batch_sizes: [{fixed}]"
                " or export the model with a dynamic batch dim"
            )


def _on_target_device(label, target):
    """True only for a TensorRT run that its backend says happened on the target device itself.

    ONNX Runtime on this host is never the target: its numbers are host numbers.
    """
    return (
        label.get("runtime") == "tensorrt"
        and getattr(target, "runtime", None) == "tensorrt"
        and label.get("on_target_device") is True
    )


def _device(label):
    provider = label.get("provider") or ""
    return provider.replace("ExecutionProvider", "").lower() or "unknown"


def _where_short(label):
    return f"host_{_device(label)}/{label.get('runtime')}"


def _note(label):
    if label.get("runtime") == "onnxruntime":
        if label.get("provider") == "CPUExecutionProvider":
            return "host CPU numbers via ONNX Runtime; not Jetson numbers"
        return f"host numbers via ONNX Runtime ({label.get('provider')}); not Jetson numbers"
    return f"host numbers via {label.get('runtime')}; not Jetson numbers"


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fmt(value):
    return "n/a" if value is None else f"{value:.1f}"
