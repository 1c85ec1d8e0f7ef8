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
    providers = request.get("providers")  # ONNX Runtime only; the host asks for the CPU alone
    key = (path, request.get("backend", "auto"), request.get("dla_core"), tuple(providers) if providers else None)
    if key not in _MODELS:
        forget_models()  # one model at a time: an engine holds device memory
        _MODELS[key] = open_model(*key)
    return _MODELS[key]


def _batch_shape(name, shape, batch_size):
    if not shape:
        raise AgentError("bad-model", "input {!r} is a scalar; it has no batch dimension".format(name))
    if any(d is None for d in shape[1:]):
        shown = "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
        raise AgentError("bad-model", "input {!r} has dynamic non-batch dims {}; export the model with a fixed input "
                                      "size to benchmark it".format(name, shown))
    if shape[0] is not None and shape[0] != batch_size:
        raise AgentError("bad-batch", "input {!r} has a fixed batch dim of {}, so it cannot run batch size {}; use "
                                      "batch_sizes: [{}] or export the model with a dynamic batch dim".format(
                                          name, shape[0], batch_size, shape[0]))
    return [batch_size] + list(shape[1:])


def _numeric(np, name, dtype):
    try:
        kind = np.dtype(dtype).kind
    except TypeError:
        kind = None
    if kind is None or kind not in "fiub":
        raise AgentError("bad-model", "input {!r} has type {}; only numeric inputs are supported".format(name, dtype))
    return dtype


def _feed(np, model, batch_size, images, seed, low, high):
    """The one feed generator (host and board): ``images`` (repeated to fill the batch) for a one-input
    model whose shape they fit, else ``numpy.random.RandomState(seed)`` uniform in [low, high) as float32,
    cast to each input's dtype. Same seed, same model -> same bytes anywhere; returns (feed, "dataset"|"random")."""
    if images is not None and len(model.inputs) == 1:
        name, shape, dtype = model.inputs[0]
        dims = _batch_shape(name, shape, batch_size)
        if list(images.shape[1:]) == dims[1:]:
            reps = -(-batch_size // len(images))
            return {name: np.ascontiguousarray(np.concatenate([images] * reps)[:batch_size].astype(dtype))}, "dataset"
    rng = np.random.RandomState(seed)
    feed = {}
    for name, shape, dtype in model.inputs:
        data = rng.uniform(low, high, size=_batch_shape(name, shape, batch_size)).astype("float32")
        feed[name] = np.ascontiguousarray(data.astype(_numeric(np, name, dtype)))
    return feed, "random"


def feed_sha256(np, feed, inputs):
    """sha256 of a feed's bytes, the inputs in model order (C order each): the same pixels give the same digest."""
    import hashlib

    digest = hashlib.sha256()
    for name, _, _ in inputs:
        digest.update(np.ascontiguousarray(feed[name]).tobytes())
    return digest.hexdigest()


MIN_POWER_SAMPLES = 20  # tegrastats samples per power window: fewer is noise


def benchmark(request, progress=None):
    """Time the model per batch size: the one benchmark, on the host (in process) and on a board.

    Every batch size is checked before any time is spent. Then per batch size: one checked call,
    ``model.time`` (warm-up, then per-call wall times; on TensorRT with the CUDA-event split) and
    ``model.loop`` over as many back-to-back calls (``loop``: {calls, seconds}: throughput). With
    ``power`` the tegrastats window is marked right before that loop (after warm-up) and read right
    after it; the loop is extended until the window lasts MIN_POWER_SAMPLES x the interval and holds
    MIN_POWER_SAMPLES samples. ``progress`` (in-process callers, ONNX Runtime): ``progress(batch_size,
    total)`` -> an object with ``update(n)`` and ``close()`` (a progress bar).
    """
    np = _numpy()
    model = _model(request)
    batch_sizes = request.get("batch_sizes", [1])
    for batch_size in batch_sizes:
        for name, shape, dtype in model.inputs:
            _batch_shape(name, shape, batch_size)
            _numeric(np, name, dtype)
    images = np.load(request["images"], allow_pickle=False) if request.get("images") else None
    low, high = request.get("input_range", [0.0, 255.0])
    warmup, iterations, duration_s = request.get("warmup", 10), request.get("iterations", 100), request.get("duration_s")
    interval_ms = request.get("power_interval_ms", 100)
    sampler = None
    if request.get("power"):
        from .power import PowerSampler

        sampler = PowerSampler.start_if_available(interval_ms)
    results = []
    try:
        for batch_size in batch_sizes:
            feed, used = _feed(np, model, batch_size, images, request.get("seed", 0), low, high)
            _first_call(model, feed, batch_size)
            if progress is None:  # in process, the caller shows its own progress
                say("benchmark batch {}: {} warm-up, {} runs".format(
                    batch_size, warmup, "{} s of".format(duration_s) if duration_s else iterations))
            bar = progress(batch_size, None if duration_s else iterations) if progress is not None else None
            try:
                if bar is None:
                    calls = model.time(feed, warmup, iterations, duration_s)
                else:
                    calls = model.time(feed, warmup, iterations, duration_s, progress=bar.update)
            finally:
                if bar is not None:
                    bar.close()
            columns = {}
            for call in calls:
                for key, value in call.items():
                    columns.setdefault(key, []).append(value)
            entry = {"batch_size": batch_size, "inputs": used, "feed_sha256": feed_sha256(np, feed, model.inputs),
                     "times_ms": columns}
            entry["loop"], power = _loop(model, feed, len(calls), sampler, interval_ms)
            if power is not None:
                entry["power"] = power
            results.append(entry)
    finally:
        if sampler is not None:
            sampler.stop()
    return {"label": model.label, "inputs": _io(model.inputs), "outputs": _io(model.outputs), "results": results,
            "power_available": sampler is not None if request.get("power") else None}


def forget_models():
    """Close and drop the loaded models (an in-process caller, the host benchmark, when it is done)."""
    for model in list(_MODELS.values()):
        if hasattr(model, "close"):
            model.close()
    _MODELS.clear()


def _first_call(model, feed, batch_size):
    """One checked call: a shape/type error is one line, not a traceback in the middle of the timing."""
    try:
        model.infer(feed)
    except AgentError:
        raise
    except MemoryError:
        raise
    except Exception as e:  # any runtime's own exception types
        raise AgentError("run-failed", "failed at batch size {}: {}".format(
            batch_size, " ".join(str(e).split())[:300] or type(e).__name__))


def _loop(model, feed, calls, sampler, interval_ms):
    """({calls, seconds} of back-to-back inference, the power window or None)."""
    overlap = getattr(model, "copies_overlap", None)  # whether the loop's copies overlapped compute (None: no copies)
    if sampler is None:
        return {"calls": calls, "seconds": model.loop(feed, calls), "copies_overlap": overlap}, None
    min_s = MIN_POWER_SAMPLES * interval_ms / 1000.0
    give_up_s = 3 * min_s + 10.0  # a stalled tegrastats must not hang the benchmark
    sampler.mark()
    done, seconds, chunk = 0, 0.0, max(1, calls)
    while True:
        seconds += model.loop(feed, chunk)
        done += chunk
        if (seconds >= min_s and sampler.count() >= MIN_POWER_SAMPLES) or seconds >= give_up_s:
            break
        left = max(min_s - seconds, interval_ms / 1000.0)
        chunk = max(1, int(left * done / seconds) + 1) if seconds > 0 else 2 * chunk
    window = sampler.window()
    window.update(interval_ms=interval_ms, min_window_s=min_s, min_samples=MIN_POWER_SAMPLES)
    return {"calls": done, "seconds": seconds, "copies_overlap": overlap}, window


def infer(request):
    """Run one feed (an .npz, base64) and return the outputs the same way."""
    np = _numpy()
    model = _model(request)
    data = np.load(io.BytesIO(base64.b64decode(_require(request, "feed"))), allow_pickle=False)
    feed = {name: data[name] for name in data.files}
    from . import EngineError
    from .cuda_binding import CudaError

    try:
        outputs = model.infer(feed)
    except (EngineError, CudaError) as e:  # TensorRT's refusal (a shape outside the profile), CUDA's: not a bug
        raise AgentError("run-failed", "the engine refused this input ({}): {}".format(
            ", ".join("{} {}".format(n, list(np.shape(v))) for n, v in sorted(feed.items())), " ".join(str(e).split())))
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
    from .cuda import CudaError
    from .trt_engine import EngineError, build_onnx

    try:
        return build_onnx(onnx_path, _require(request, "engine"), request.get("precision", "fp16"),
                          request.get("workspace_mb", 1024), request.get("profile") or {},
                          dla_core=request.get("dla_core"), timing_cache=request.get("timing_cache"),
                          calibration=request.get("calibration"), log_path=request.get("log"),
                          typed=request.get("typed"))
    except EngineError as e:
        raise AgentError("build-failed", str(e))
    except CudaError as e:  # the int8 calibrator's CUDA (no device, no binding): the build failed, not the agent
        raise AgentError("build-failed", "int8 calibration needs CUDA: {}".format(" ".join(str(e).split())))
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
