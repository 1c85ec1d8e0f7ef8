"""The agent's commands: each takes the request dict and returns a JSON-ready dict."""

import base64
import io
import os
import platform
import sys

from . import AgentError, say

AGENT_PROTOCOL = 1


def dispatch(request):
    command = request.get("command")
    handler = COMMANDS.get(command)
    if handler is None:
        raise AgentError("bad-request", "unknown command {!r} (commands: {})".format(command, ", ".join(sorted(COMMANDS))))
    return handler(request)


def ping(request):
    """Fast: which libraries are installed (found, not imported) and this Python."""
    from .probe import has_module

    return {"protocol": AGENT_PROTOCOL, "python": platform.python_version(), "executable": sys.executable,
            "machine": platform.machine(),
            "has": {name: has_module(name) for name in ("tensorrt", "onnxruntime", "numpy", "uff", "pycuda", "cuda")}}


def probe(request):
    from .probe import probe as run_probe

    # DEPLOY_DEVICE_ROOT: read the identity files of a board root file system mounted elsewhere (an SD card
    # image, a captured tree in the tests); the commands (nvpmodel, jetson_clocks) still run from PATH
    return run_probe(root=request.get("root") or os.environ.get("DEPLOY_DEVICE_ROOT") or "/")


def _numpy():
    try:
        import numpy
    except ImportError:
        raise AgentError("no-numpy", "numpy is not installed for {} on the device; pip3 install numpy".format(sys.executable))
    return numpy


def _require(request, key):
    value = request.get(key)
    if value is None:
        raise AgentError("bad-request", "the request has no {!r}".format(key))
    return value


_MODELS = {}  # models this agent process loaded: a serving agent runs many requests on one model


def _model(request):
    from .runners import open_model

    path = _require(request, "model")
    if not os.path.exists(path):
        raise AgentError("missing-file", "{} is not on the device (it is sent before each run; re-run)".format(path))
    key = (path, request.get("backend", "auto"), request.get("dla_core"))
    if key not in _MODELS:
        _MODELS.clear()  # one model at a time: an engine holds device memory
        _MODELS[key] = open_model(*key)
    return _MODELS[key]


def _batch_shape(name, shape, batch_size):
    if not shape:
        raise AgentError("bad-model", "input {!r} is a scalar; it has no batch dimension".format(name))
    if any(d is None for d in shape[1:]):
        raise AgentError("bad-model", "input {!r} has dynamic non-batch dims {}; export with a fixed input size".format(
            name, shape))
    if shape[0] is not None and shape[0] != batch_size:
        raise AgentError("bad-batch", "input {!r} has a fixed batch dim of {}, so it cannot run batch size {}".format(
            name, shape[0], batch_size))
    return [batch_size] + list(shape[1:])


def _feed(np, model, batch_size, images, seed, low, high):
    """The images (repeated to fill the batch) for a one-input model, else seeded uniform values."""
    if images is not None and len(model.inputs) == 1:
        name, shape, dtype = model.inputs[0]
        dims = _batch_shape(name, shape, batch_size)
        if list(images.shape[1:]) == dims[1:]:
            reps = -(-batch_size // len(images))
            return {name: np.concatenate([images] * reps)[:batch_size].astype(dtype)}, "dataset"
    rng = np.random.RandomState(seed)
    feed = {}
    for name, shape, dtype in model.inputs:
        data = rng.uniform(low, high, size=_batch_shape(name, shape, batch_size)).astype("float32")
        feed[name] = data.astype(dtype)
    return feed, "random"


def benchmark(request):
    """Time the model per batch size; per call milliseconds come back as columns (h2d/compute/d2h on TensorRT)."""
    np = _numpy()
    model = _model(request)
    images = np.load(request["images"], allow_pickle=False) if request.get("images") else None
    low, high = request.get("input_range", [0.0, 255.0])
    sampler = None
    if request.get("power"):
        from .power import PowerSampler

        sampler = PowerSampler.start_if_available(request.get("power_interval_ms", 100))
    results = []
    try:
        for batch_size in request.get("batch_sizes", [1]):
            feed, used = _feed(np, model, batch_size, images, request.get("seed", 0), low, high)
            say("benchmark batch {}: {} warm-up, {} runs".format(
                batch_size, request.get("warmup", 10),
                "{} s of".format(request["duration_s"]) if request.get("duration_s") else request.get("iterations", 100)))
            if sampler is not None:
                sampler.mark()
            calls = model.time(feed, request.get("warmup", 10), request.get("iterations", 100), request.get("duration_s"))
            columns = {}
            for call in calls:
                for key, value in call.items():
                    columns.setdefault(key, []).append(value)
            entry = {"batch_size": batch_size, "inputs": used, "times_ms": columns}
            if sampler is not None:
                entry["power"] = sampler.window()
            results.append(entry)
    finally:
        if sampler is not None:
            sampler.stop()
    return {"label": model.label, "inputs": _io(model.inputs), "outputs": _io(model.outputs), "results": results,
            "power_available": sampler is not None if request.get("power") else None}


def infer(request):
    """Run one feed (an .npz, base64) and return the outputs the same way."""
    np = _numpy()
    model = _model(request)
    data = np.load(io.BytesIO(base64.b64decode(_require(request, "feed"))), allow_pickle=False)
    feed = {name: data[name] for name in data.files}
    outputs = model.infer(feed)
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.asarray(value) for name, value in outputs.items()})
    return {"outputs": base64.b64encode(buffer.getvalue()).decode("ascii"), "order": [o[0] for o in model.outputs],
            "label": model.label, "inputs": _io(model.inputs)}


def describe(request):
    model = _model(request)
    return {"label": model.label, "inputs": _io(model.inputs), "outputs": _io(model.outputs)}


def build(request):
    """Build a TensorRT engine from an ONNX model (trt_engine.build_onnx, or trtexec); the engine stays on the device."""
    onnx_path = _require(request, "onnx")
    if not os.path.exists(onnx_path):
        raise AgentError("missing-file", "{} is not on the device (it is sent before each build; re-run)".format(onnx_path))
    if request.get("builder") == "trtexec":
        from .trtexec_build import build as build_with_trtexec

        return build_with_trtexec(request)
    from .trt_engine import EngineError, build_onnx

    try:
        return build_onnx(onnx_path, _require(request, "engine"), request.get("precision", "fp16"),
                          request.get("workspace_mb", 1024), request.get("profile") or {},
                          dla_core=request.get("dla_core"), timing_cache=request.get("timing_cache"),
                          calibration=request.get("calibration"), log_path=request.get("log"))
    except EngineError as e:
        raise AgentError("build-failed", str(e))
    except ImportError as e:
        raise AgentError("no-tensorrt", "TensorRT's Python bindings are not importable on this device ({}); "
                                        "on a Jetson: sudo apt install python3-libnvinfer".format(e))


def build_uff(request):
    """UFF route (TensorRT <= 8.x): NVIDIA's converter on the frozen graph, then the UFF parser."""
    from .trt_engine import EngineError, build_uff as build, convert_to_uff

    frozen = _require(request, "frozen")
    if not os.path.exists(frozen):
        raise AgentError("missing-file", "{} is not on the device (it is sent before each build; re-run)".format(frozen))
    try:
        converted = convert_to_uff(frozen, _require(request, "outputs"), _require(request, "uff"))
        result = build(request["uff"], _require(request, "engine"), _require(request, "input"),
                       _require(request, "input_shape"), request["outputs"], request.get("precision", "fp16"),
                       request.get("workspace_mb", 1024), request.get("max_batch_size", 8), log_path=request.get("log"))
    except EngineError as e:
        raise AgentError("build-failed", str(e))
    except ImportError as e:
        raise AgentError("no-tensorrt", "TensorRT's Python bindings are not importable on this device ({})".format(e))
    result.update(converted)
    return result


def _io(items):
    return [{"name": n, "shape": list(s) if s is not None else None, "dtype": str(d)} for n, s, d in items]


COMMANDS = {"ping": ping, "probe": probe, "benchmark": benchmark, "infer": infer, "describe": describe, "build": build,
            "build_uff": build_uff}
