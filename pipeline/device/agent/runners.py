"""The agent's backends behind one shape: ``inputs``/``outputs`` [(name, shape, dtype)], ``infer(feed)``
and ``time(feed, warmup, iterations, duration_s)`` -> one dict of milliseconds per timed call.

- ``onnxruntime``: an ONNX model on ONNX Runtime (the host, or a board with onnxruntime-gpu); each call
  timed with ``time.perf_counter`` between consecutive calls (one clock read per call, so the
  loop adds almost nothing); ``total_ms`` only.
- ``tensorrt``: a serialized engine on TensorRT (``trt_runtime.Engine``): CUDA events split every call
  into ``h2d_ms``, ``compute_ms``, ``d2h_ms`` and ``total_ms``.
"""

import time

from . import AgentError

ORT_TYPES = {
    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
    "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(int32)": "int32", "tensor(int64)": "int64",
    "tensor(bool)": "bool",
}


def backend_for(path, backend):
    """The backend a model file runs on: ``auto`` picks it from the file (.onnx or an engine)."""
    if backend != "auto":
        return backend
    return "onnxruntime" if path.endswith(".onnx") else "tensorrt"


def open_model(path, backend="auto", dla_core=None):
    backend = backend_for(path, backend)
    if backend == "onnxruntime":
        return OrtModel(path)
    if backend == "tensorrt":
        from .trt_engine import EngineError
        from .trt_runtime import Engine

        try:
            return Engine(path, dla_core=dla_core)
        except EngineError as e:
            raise AgentError("tensorrt", str(e))
        except ImportError as e:
            raise AgentError("no-tensorrt", "TensorRT's Python bindings are not importable on this machine ({}); "
                                            "on a Jetson: sudo apt install python3-libnvinfer".format(e))
    raise AgentError("bad-request", "unknown backend {!r} (onnxruntime, tensorrt)".format(backend))


class OrtModel(object):
    """An ONNX model on ONNX Runtime's CPU provider (or CUDA where the board's onnxruntime-gpu has it)."""

    def __init__(self, path):
        try:
            import onnxruntime as ort
        except ImportError:
            raise AgentError("no-onnxruntime", "onnxruntime is not installed for this Python; pip install onnxruntime")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in ort.get_available_providers()]
        try:
            self.session = ort.InferenceSession(path, options, providers=providers)
        except Exception as e:  # onnxruntime raises its own exception types
            raise AgentError("bad-model", "ONNX Runtime cannot load {}: {}".format(path, " ".join(str(e).split())[:300]))
        self.inputs = [(i.name, _dims(i.shape), ORT_TYPES.get(i.type, i.type)) for i in self.session.get_inputs()]
        self.outputs = [(o.name, _dims(o.shape), ORT_TYPES.get(o.type, o.type)) for o in self.session.get_outputs()]
        self.label = {"runtime": "onnxruntime", "version": ort.__version__, "provider": self.session.get_providers()[0]}

    def infer(self, feed):
        values = self.session.run(None, feed)
        return dict(zip([o[0] for o in self.outputs], values))

    def time(self, feed, warmup, iterations, duration_s=None):
        run, clock = self.session.run, time.perf_counter
        for _ in range(warmup):
            run(None, feed)
        if duration_s is None:
            stamps = [0.0] * (iterations + 1)  # one clock read per call: call i took stamps[i+1] - stamps[i]
            stamps[0] = clock()
            for i in range(1, iterations + 1):
                run(None, feed)
                stamps[i] = clock()
        else:
            stamps = [clock()]
            end = stamps[0] + duration_s
            while stamps[-1] < end:
                run(None, feed)
                stamps.append(clock())
        return [{"total_ms": (b - a) * 1000.0} for a, b in zip(stamps, stamps[1:])]


def _dims(shape):
    return [d if isinstance(d, int) else None for d in shape]
