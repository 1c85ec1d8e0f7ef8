"""The benchmark stage on a device: the agent times the engine (TensorRT) or the ONNX model (ONNX
Runtime) there, and the host turns its per-call times into the same ``benchmark.json`` as on the host.

On TensorRT every call is split into host-to-device copy, compute and device-to-host copy (CUDA
events); tegrastats, where the board has it, gives mean power per rail and energy per image; the
board's identity (the probe) is stored with the numbers, with warnings where clocks are not locked
or the power mode is not the maximum (the usual cause of noisy Jetson figures).
"""

import tempfile
from pathlib import Path

from pipeline.device.client import device_for, fingerprint
from pipeline.errors import DeployError

PHASES = ("h2d_ms", "compute_ms", "d2h_ms")


def model_for(ctx, device):
    """(local model file, backend): the engine on TensorRT, else the ONNX model on ONNX Runtime."""
    from pipeline.files import onnx_file

    backend = device.backend()
    engine = ctx.inputs.get("engine")
    if backend == "tensorrt":
        if engine is None:
            raise DeployError("device.backend is tensorrt on {} but the config has no stages.engine: add engine: "
                              "to build the engine the benchmark runs".format(device.describe()))
        return Path(engine), "tensorrt"
    return onnx_file(ctx.inputs["onnx"]), "onnxruntime"


def run_on_device(ctx, dataset_samples, input_range, seed):
    """(report fields, device session for the consistency check) for ``ctx.options``."""
    from pipeline.backends.device import DeviceSession
    from pipeline.bench.latency import summarize

    opts = ctx.options
    device = device_for(ctx.config, ctx.progress)
    local_model, backend = model_for(ctx, device)
    transport = device.transport
    remote_model = transport.send(local_model)
    session = DeviceSession(device, remote_model, backend, dla_core=_dla_core(ctx))
    request = {"command": "benchmark", "model": remote_model, "backend": backend, "dla_core": session.request["dla_core"],
               "batch_sizes": list(opts.batch_sizes), "warmup": opts.warmup, "iterations": opts.iterations,
               "duration_s": opts.duration_s, "seed": seed, "input_range": list(input_range),
               "power": bool(ctx.config.device.power)}
    used_dataset = False
    if opts.inputs == "dataset" and len(session.inputs) == 1:
        shape = session.inputs[0][1]
        if shape is not None and len(shape) == 4 and shape[3] == 3 and shape[1] and shape[2]:
            images, source = dataset_samples(ctx.config, max(opts.batch_sizes), (shape[1], shape[2]))
            if source.startswith("dataset"):
                request["images"] = _send_array(transport, images)
                used_dataset = True
    ctx.progress.log("benchmark: {} on {} ({})".format(local_model.name, device.describe(), backend))
    answer = device.call(request, what="the benchmark")
    probe = device.probe()
    results = []
    for entry in answer["results"]:
        bs = entry["batch_size"]
        times = entry["times_ms"]
        stats = summarize([t / 1000.0 for t in times["total_ms"]], bs)
        phases = {p: sum(times[p]) / len(times[p]) for p in PHASES if times.get(p)}
        if phases:
            stats["phases_mean_ms"] = phases
        power = entry.get("power")
        if power is not None:
            stats["power"] = _energy(power, sum(times["total_ms"]) / 1000.0, bs * len(times["total_ms"]))
        results.append(dict(stats, batch_size=bs))
        ctx.progress.log("benchmark: batch {}: p50 {:.3f} ms, p99 {:.3f} ms on {}".format(
            bs, stats["p50_ms"], stats["p99_ms"], device.describe()))
    on_target = backend == "tensorrt" and probe.get("board") == ctx.target.name
    label = dict(answer["label"])
    where = dict(label, target=ctx.target.name, target_runtime=ctx.target.runtime, on_target_device=on_target,
                 device=device.describe(), transport=ctx.config.device.transport, fingerprint=fingerprint(probe))
    warnings = noise_warnings(probe) if backend == "tensorrt" else []
    if not on_target:
        where["note"] = ("{} via the device agent on {}; not {} numbers".format(label.get("runtime"), device.describe(),
                                                                            ctx.target.name))
    if warnings:
        where["warnings"] = warnings
        for w in warnings:
            ctx.progress.log("warning: " + w)
    short = "{}/{}".format(probe.get("board") or probe.get("hostname") or "device", label.get("runtime"))
    return {"where": where, "where_short": short, "results": results, "inputs_used": "dataset" if used_dataset else "random",
            "model": local_model, "session": session, "backend": backend}


def _dla_core(ctx):
    engine = ctx.config.stages.engine
    return engine.dla_core if engine is not None else None


def _send_array(transport, array):
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "images.npy"
        np.save(path, np.ascontiguousarray(array, dtype=np.float32))
        return transport.send(path)


def _energy(power, busy_s, images):
    """Mean power per rail (mW) over the window and, from the module's power (its input rail, or the sum
    of the rails on boards without one), energy per image in mJ over the timed calls."""
    out = {"samples": power.get("samples", 0), "rails_mw": power.get("rails_mw", {}),
           "board_mw": power.get("board_mw"), "board_power_source": power.get("board_power_source")}
    if power.get("board_mw") is not None and images and power.get("samples"):
        out["energy_per_image_mj"] = power["board_mw"] * busy_s / images
    return out


def noise_warnings(probe):
    """Why a board's numbers may be noisy: clocks not locked, power mode not the maximum."""
    warnings = []
    if probe.get("clocks_locked") is False:
        warnings.append("clocks are not locked: run `sudo jetson_clocks` on the board for stable figures")
    elif probe.get("clocks_locked") is None:
        warnings.append("could not tell whether clocks are locked (jetson_clocks --show needs root)")
    mode = probe.get("power_mode") or {}
    if mode and not mode.get("is_max"):
        warnings.append("power mode is {} (id {}), not MAXN: `sudo nvpmodel -m 0` for the maximum".format(
            mode.get("mode_name"), mode.get("mode_id")))
    return warnings
