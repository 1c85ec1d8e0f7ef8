"""The benchmark on the machine running deploy: the device agent's own ``commands.benchmark``, called in
this process on the ONNX model with ONNX Runtime's CPU provider (host numbers never silently move to a
GPU). The same request and answer as on a board (``pipeline.device.benchmark.DeviceRun``), so
``pipeline.bench.report`` writes ``benchmark.json`` the same way for both.
"""

import shutil
import tempfile
from pathlib import Path

from pipeline.errors import DeployError, StageFailed

KEY = "stages.benchmark"
PROVIDERS = ("CPUExecutionProvider",)


class HostRun:
    backend = "onnxruntime"
    board = None  # never a board: host numbers are never target numbers

    def __init__(self, model_path, progress):
        from pipeline.backends import load_onnx

        self.model_path = Path(model_path)
        self.progress = progress
        self.session = load_onnx(self.model_path)  # a one-line error for a missing or broken file; the consistency check
        self.inputs = self.session.inputs
        self.request = {"model": str(self.model_path), "backend": "onnxruntime", "providers": list(PROVIDERS),
                        "power": False}
        self._tmp = None

    def send_array(self, array):
        """The images' path for the request (an .npy in a temporary folder, removed by ``close``)."""
        import numpy as np

        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="deploy-bench-")
        path = Path(self._tmp) / "images.npy"
        np.save(path, np.ascontiguousarray(array, dtype=np.float32))
        return str(path)

    def benchmark(self, request):
        from pipeline.device.agent import AgentError
        from pipeline.device.agent import commands

        def bar(batch_size, total):
            return self.progress.bar(total=total, desc="benchmark b{}".format(batch_size), unit="it")

        try:
            return commands.benchmark(request, progress=bar)
        except AgentError as e:
            raise host_error(e, self.model_path.name) from None

    def where(self, label, target):
        from pipeline.backends.onnxruntime import host_label

        return {"host": host_label(), "providers": list(self.session.label.get("providers") or PROVIDERS)}

    def note(self, label, target):
        if label.get("runtime") == "onnxruntime":
            if label.get("provider") == "CPUExecutionProvider":
                return "host CPU numbers via ONNX Runtime; not Jetson numbers"
            return "host numbers via ONNX Runtime ({}); not Jetson numbers".format(label.get("provider"))
        return "host numbers via {}; not Jetson numbers".format(label.get("runtime"))

    def short(self, label):
        device = (label.get("provider") or "").replace("ExecutionProvider", "").lower() or "unknown"
        return "host_{}/{}".format(device, label.get("runtime"))

    def close(self):
        from pipeline.device.agent import commands

        commands.forget_models()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def host_error(error, model_name):
    """The agent's one-line error as the stage's: the config key for a batch size, the model for the rest."""
    message = str(error)
    if error.kind == "bad-batch":
        return DeployError("{}.batch_sizes: the model's {}".format(KEY, message))
    if error.kind == "bad-model":
        return DeployError("benchmark: model {}".format(message))
    if error.kind == "run-failed":
        return StageFailed("benchmark: {} {}".format(model_name, message))
    return DeployError("benchmark: {}".format(message))
