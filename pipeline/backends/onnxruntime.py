"""The ONNX Runtime backend: ``load(path, providers)`` or ``from_model(model)`` -> ``Session``.

The run path is kept thin for the latency harness: the output names are bound once and
``Session.run`` is ``functools.partial(InferenceSession.run, output_names)``, so a call is
``sess.run(output_names, feed)`` with no Python frame of ours in between.
"""

import functools
import os
import platform
from pathlib import Path

from pipeline.errors import DeployError

DEFAULT_PROVIDERS = ("CPUExecutionProvider",)

# ONNX Runtime element types ("tensor(float)") -> numpy dtype names.
_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(bfloat16)": "bfloat16",
    "tensor(int8)": "int8",
    "tensor(int16)": "int16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(uint8)": "uint8",
    "tensor(uint16)": "uint16",
    "tensor(uint32)": "uint32",
    "tensor(uint64)": "uint64",
    "tensor(bool)": "bool",
    "tensor(string)": "str",
}


class Session:
    """A loaded model (the session shape of ``pipeline.backends``). ``provider``: the first
    provider ORT uses. ``native``: the ``onnxruntime.InferenceSession``.
    """

    name = "onnxruntime"

    def __init__(self, sess, path):
        import onnxruntime

        self.path = Path(path)
        self.inputs = [_describe(arg) for arg in sess.get_inputs()]
        self.outputs = [_describe(arg) for arg in sess.get_outputs()]
        self.output_names = [name for name, _, _ in self.outputs]
        self.provider = sess.get_providers()[0]
        self.label = {
            "runtime": "onnxruntime",
            "version": onnxruntime.__version__,
            "provider": self.provider,
            "providers": list(sess.get_providers()),
            "host": host_label(),
        }
        self.native = sess  # the onnxruntime.InferenceSession itself
        # run(feed) == sess.run(output_names, feed): bound once, no extra Python frame.
        self.run = functools.partial(sess.run, self.output_names)

    def __repr__(self):
        return f"<Session {self.path.name} onnxruntime/{self.provider}>"


def load(path, providers=None):
    """Load ``path`` with ONNX Runtime; one-line ``DeployError`` if the file is missing or invalid."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not an .onnx file" if path.is_dir() else "does not exist"
        raise DeployError(f"ONNX model {path} {what}")
    try:
        import onnxruntime
    except ImportError:
        raise DeployError(
            "onnxruntime is not installed: pip install 'deploy[tf]' (or onnxruntime) to benchmark ONNX models"
        ) from None

    _check_external_data(path)
    providers = list(providers) if providers else list(DEFAULT_PROVIDERS)
    available = onnxruntime.get_available_providers()
    missing = [p for p in providers if p not in available]
    if missing:
        raise DeployError(
            f"ONNX Runtime {onnxruntime.__version__} has no provider {', '.join(missing)} on this machine"
            f" (available: {', '.join(available)})"
        )
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: no warning spam on stderr
    try:
        sess = onnxruntime.InferenceSession(str(path), sess_options=options, providers=providers)
    except Exception as err:  # ORT raises its own Fail/InvalidGraph/InvalidProtobuf... types
        reason = " ".join(str(err).split()) or type(err).__name__
        raise DeployError(f"ONNX Runtime cannot load {path}: {reason}") from None
    return Session(sess, path)


def from_model(model, what="the model"):
    """A session for an in-memory ``onnx.ModelProto`` (rewrite's before/after comparisons), CPU only."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    try:
        sess = onnxruntime.InferenceSession(model.SerializeToString(), sess_options=options,
                                            providers=list(DEFAULT_PROVIDERS))
    except Exception as err:
        raise DeployError("ONNX Runtime cannot load {}: {}".format(what, " ".join(str(err).split()) or type(err).__name__)) from None
    return Session(sess, "<{}>".format(what))


def _check_external_data(path):
    """Refuse external data outside the model's folder before ONNX Runtime reads any (recent ONNX
    Runtime refuses it too; older ones, like those on a Jetson, do not)."""
    import onnx

    from pipeline.backends.external_data import check_external_data

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # not ONNX at all: ONNX Runtime's own error says so
        return
    check_external_data(model, path)


def host_label():
    """The machine this process runs on: node, machine, system, CPU model and count."""
    return {
        "node": platform.node(),
        "machine": platform.machine(),
        "system": platform.system(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
    }


def _describe(arg):
    shape = tuple(dim if isinstance(dim, int) and dim >= 0 else None for dim in (arg.shape or ()))
    return (arg.name, shape, _DTYPES.get(arg.type, arg.type))


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None
