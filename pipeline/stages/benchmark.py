"""The benchmark stage: latency, throughput (and on a board with tegrastats, energy) per batch size.

One benchmark everywhere: the device agent's ``commands.benchmark`` measures, called in this process
on the host (``pipeline.bench.host``: ONNX Runtime's CPU provider, host numbers, never reported as
target numbers) or through the transport on a device (``pipeline.device.benchmark``: the engine on
TensorRT, or ONNX Runtime there). ``pipeline.bench.report`` turns its answer into ``benchmark.json``.
"""

from pipeline.errors import StageFailed
from pipeline.files import onnx_file, sha256_file
from pipeline.stages import stage

SEED = 0
INPUT_RANGE = (0.0, 255.0)


@stage(
    "benchmark",
    inputs={"onnx": "convert", "engine": "engine", "engine_manifest": "engine"},
    optional=("engine", "engine_manifest"),
    outputs={"benchmark": "benchmark.json"},
    version=5,
    uses=("target", "dataset", "device"),
    tools=("onnxruntime", "numpy"),
)
def benchmark(ctx):
    """Measure latency and throughput of the model for each batch size (on the device when configured). One
    benchmark at a time on this machine (``device.turns``): a timed loop here never shares the CPU with another
    run's benchmark work."""
    from pipeline.device.turns import benchmark_turn

    with benchmark_turn(ctx.progress.log):
        if ctx.config.device is not None:
            from pipeline.device.client import open_device

            with open_device(ctx.config, ctx.progress) as device:
                return _measure(ctx, _device_run(ctx, device))
        from pipeline.bench.host import HostRun

        return _measure(ctx, HostRun(onnx_file(ctx.inputs["onnx"]), ctx.progress))


def _device_run(ctx, device):
    """The run on ``device``: the engine (with the engine stage's engine.json, for its DLA placement) on TensorRT,
    else the ONNX model on ONNX Runtime there."""
    from pipeline.device.benchmark import DeviceRun

    engine = ctx.config.stages.engine
    return DeviceRun(device, ctx.inputs.get("engine"), ctx.inputs["onnx"], engine_manifest=ctx.inputs.get("engine_manifest"),
                     dla_core=engine.dla_core if engine is not None else None, power=ctx.config.device.power,
                     transport=ctx.config.device.transport, log=ctx.progress.log)


def _measure(ctx, run):
    from pipeline.bench import report as bench_report

    opts = ctx.options
    try:
        settings = {
            "batch_sizes": list(opts.batch_sizes), "warmup": opts.warmup,
            "mode": "iterations" if opts.duration_s is None else "duration",
            "iterations": opts.iterations, "duration_s": opts.duration_s, "inputs_requested": opts.inputs,
            "seed": SEED, "input_range": list(INPUT_RANGE),
            "feed": "dataset images repeated to fill the batch, else numpy RandomState(seed) uniform in input_range",
        }
        request = dict(run.request, command="benchmark", batch_sizes=settings["batch_sizes"], warmup=opts.warmup,
                       iterations=opts.iterations, duration_s=opts.duration_s, seed=SEED, input_range=list(INPUT_RANGE))
        images = _dataset_images(ctx, run.inputs, max(opts.batch_sizes)) if opts.inputs == "dataset" else None
        if images is not None:
            request["images"] = run.send_array(images)
        answer = run.benchmark(request)
        label = dict(answer["label"])
        on_target = bench_report.on_target_device(label, ctx.target, run.board)
        # the label's dla_core is the core asked for; where the engine runs is engine.json's placement (run.where)
        where = dict({k: v for k, v in label.items() if k != "dla_core"}, target=ctx.target.name,
                     target_runtime=ctx.target.runtime, on_target_device=on_target)
        where.update(run.where(label, ctx.target))
        if not on_target:
            where["note"] = run.note(label, ctx.target)
        model = {"name": run.model_path.name, "sha256": sha256_file(run.model_path), "bytes": run.model_path.stat().st_size}
        report = bench_report.build(answer, where, model, settings)
        where_short = run.short(label)
        for r in report["results"]:
            ctx.progress.log(bench_report.log_line(r, where_short))
        if run.backend == "tensorrt":
            report["accuracy"] = _accuracy(ctx, run.session)
        return _finish(ctx, report, run.session, run.model_path, where_short, report["results"])
    finally:
        run.close()


def _dataset_images(ctx, inputs, count):
    """Dataset images for a one-input NHWC RGB model (``count`` of them), else None (the feed is random)."""
    from pipeline.graph.io import image_input

    image = image_input(inputs)
    if image is None or image[3] != 3:
        return None
    from pipeline.data.dataset import dataset_samples

    images, source = dataset_samples(ctx.config, count, image[1:3])
    return images if source.startswith("dataset") else None


def _accuracy(ctx, session):
    """The engine against the ONNX model on ONNX Runtime here, on dataset images: what fp16/int8 cost."""
    from pipeline.backends import load_onnx
    from pipeline.data.dataset import dataset_samples
    from pipeline.numeric import compare_outputs

    reference = load_onnx(onnx_file(ctx.inputs["onnx"]))
    shape = reference.inputs[0][1]
    images, source = dataset_samples(ctx.config, ctx.options.accuracy_images, (shape[1], shape[2]))
    engine = ctx.config.stages.engine
    precision = engine.precision if engine is not None else "fp32"
    batch = _static_batch(ctx)
    if batch is None:
        batch = min(8, engine.max_batch_size if engine else 8)
    else:  # a DLA engine runs its one batch size only: whole batches, the images repeated to fill the last
        import numpy as np

        count = max(batch, len(images) // batch * batch)
        images = np.concatenate([images] * -(-count // len(images)))[:count]
    report = compare_outputs(reference, session, images, precision, batch=batch)
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
    from pipeline import records

    records.write(out, report, "benchmark")  # schema deploy.benchmark/1: what deploy report/compare read back

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


def _static_batch(ctx):
    """The one batch size a DLA engine was built for (no dynamic shapes on DLA), else None."""
    engine = ctx.config.stages.engine
    if engine is None or engine.dla_core is None or ctx.inputs.get("engine") is None:
        return None
    from pipeline.device.engine import dla_batch

    return dla_batch(engine, list(ctx.options.batch_sizes))


def _consistency(ctx, session, model_path, batch_sizes):
    """Each sample alone vs inside the benchmark's batches (sizes above 1) on the same runtime, within the
    tolerance of the precision the model runs at (an fp16/int8 engine picks kernels per batch shape)."""
    sizes = [b for b in batch_sizes if b > 1]
    if not ctx.options.consistency or not sizes:
        return None
    from pipeline.numeric import tolerance
    from pipeline.numeric.consistency import batch_consistency
    from pipeline.data.dataset import dataset_samples

    from pipeline.graph.io import image_input

    image = image_input(session.inputs)
    if image is None or image[3] != 3:  # dataset images are RGB
        return None
    runtime = (session.label or {}).get("runtime")
    if runtime == "tensorrt" and _static_batch(ctx) is not None:
        ctx.progress.log("benchmark: batch consistency not checked: the DLA engine runs batch {} only (DLA has no "
                         "dynamic shapes), so an image cannot run alone on it".format(_static_batch(ctx)))
        return None
    engine = ctx.config.stages.engine
    precision = engine.precision if runtime == "tensorrt" and engine is not None else "fp32"
    atol, rtol = tolerance(precision)
    images, source = dataset_samples(ctx.config, ctx.options.consistency_samples, image[1:3])
    report = batch_consistency(session, images, sizes, tolerance=atol, rtol=rtol, source=source, model=str(model_path),
                               progress=ctx.progress.log)
    ctx.progress.log("benchmark: batch consistency {} on {} images ({})".format(
        "pass" if report.passed else "FAIL", len(images), source))
    return report.to_dict()
