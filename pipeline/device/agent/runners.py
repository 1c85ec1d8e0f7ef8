"""The agent's backends behind one shape: ``inputs``/``outputs`` [(name, shape, dtype)], ``infer(feed)``,
``time(feed, warmup, iterations, duration_s)`` -> one dict of milliseconds per timed call (``total_ms``:
wall time of one inference, copies included), ``loop(feed, calls)`` -> wall seconds of ``calls``
back-to-back inferences (throughput) and ``close()``. This is the one runner layer: the host's benchmark
calls it in process (``pipeline.device.agent.commands``), a board through the transport.

- ``onnxruntime``: an ONNX model on ONNX Runtime (the host, or a board with onnxruntime-gpu); each call
  timed with ``time.perf_counter`` between consecutive calls (one clock read per call, so the
  loop adds almost nothing); ``total_ms`` only. ``providers`` picks the execution providers (the host
  asks for the CPU only, so its numbers never silently move to a GPU); default: CUDA where present.
- ``tensorrt``: a serialized engine on TensorRT (``trt_runtime.Engine``): CUDA events split every call
  into ``h2d_ms``, ``compute_ms``, ``d2h_ms`` and ``total_ms``.
"""

import time

from . import AgentError

PROGRESS_EVERY_S = 0.1  # how often ``time`` reports progress when asked to

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


def open_model(path, backend="auto", dla_core=None, providers=None):
    backend = backend_for(path, backend)
    if backend == "onnxruntime":
        return OrtModel(path, providers)
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

    def __init__(self, path, providers=None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise AgentError("no-onnxruntime", "onnxruntime is not installed for this Python; pip install onnxruntime")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        wanted = providers or ("CUDAExecutionProvider", "CPUExecutionProvider")
        providers = [p for p in wanted if p in ort.get_available_providers()]
        if not providers:
            raise AgentError("bad-request", "none of the providers {} is in this onnxruntime ({})".format(
                list(wanted), ", ".join(ort.get_available_providers())))
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

    def time(self, feed, warmup, iterations, duration_s=None, progress=None):
        """Per-call wall times after ``warmup`` calls: ``iterations`` calls, or calls until ``duration_s``
        seconds have passed (the call in flight finishes and counts). ``progress(n)``, if given, hears
        about the calls done in chunks of about PROGRESS_EVERY_S seconds (outside the timed calls)."""
        run, clock = self.session.run, time.perf_counter
        for _ in range(warmup):
            run(None, feed)
        stamps = [clock()]  # one clock read per call: call i took stamps[i+1] - stamps[i]
        append = stamps.append
        deadline = None if duration_s is None else stamps[0] + duration_s
        chunk = 1 if progress is not None else (iterations if deadline is None else 1 << 62)
        while True:
            if deadline is None:
                n = max(0, min(chunk, iterations - (len(stamps) - 1)))
                for _ in range(n):
                    run(None, feed)
                    append(clock())
                finished = len(stamps) - 1 >= iterations
            else:
                n = 0
                for _ in range(chunk):
                    run(None, feed)
                    append(clock())
                    n += 1
                    if stamps[-1] >= deadline:
                        break
                finished = stamps[-1] >= deadline
            if progress is not None:
                progress(n)
                spent = stamps[-1] - stamps[-1 - n] if n else 0.0
                chunk = max(1, int(PROGRESS_EVERY_S * n / spent)) if spent > 0 else max(1, 2 * n)
            if finished:
                break
        return [{"total_ms": (b - a) * 1000.0} for a, b in zip(stamps, stamps[1:])]

    def loop(self, feed, calls):
        """Wall seconds of ``calls`` back-to-back inferences (ONNX Runtime's run is synchronous)."""
        run, clock = self.session.run, time.perf_counter
        start = clock()
        for _ in range(calls):
            run(None, feed)
        return clock() - start

    def close(self):
        self.session = None


def _dims(shape):
    return [d if isinstance(d, int) else None for d in shape]
