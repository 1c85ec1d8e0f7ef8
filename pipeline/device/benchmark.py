"""The benchmark stage on a device: the agent times the engine (TensorRT) or the ONNX model (ONNX
Runtime) there; ``pipeline.bench.report`` turns its answer into ``benchmark.json`` exactly as on the host.

On TensorRT every call is also split into host-to-device copy, compute and device-to-host copy (CUDA
events); tegrastats, where the board has it, gives mean power per rail and energy per image; the
board's identity (the probe) is stored with the numbers, with warnings where clocks are not locked
or the power mode is not the maximum (the usual cause of noisy Jetson figures), and a DLA engine's
placement (engine.json's ``dla``).
"""

import tempfile
from pathlib import Path

from pipeline.device.client import fingerprint, hardware_label
from pipeline.errors import DeployError


def model_for(device, engine, onnx):
    """(local model file, backend): the engine (the engine stage's file, or None) on TensorRT, else the ONNX
    model (the convert stage's artifact) on ONNX Runtime."""
    from pipeline.files import onnx_file

    backend = device.backend()
    if backend == "tensorrt":
        if engine is None:
            raise DeployError("device.backend is tensorrt on {} but the config has no stages.engine: add engine: "
                              "to build the engine the benchmark runs".format(device.describe()))
        return Path(engine), "tensorrt"
    return onnx_file(onnx), "onnxruntime"


def _noop(message):
    pass


class DeviceRun:
    """The agent on ``device``: the engine on TensorRT, else the ONNX model on ONNX Runtime (``model_for``).
    Same request and answer as the host's ``pipeline.bench.host.HostRun``. ``transport`` (the config's
    device.transport) and ``power`` (device.power) label and shape the request; ``engine_manifest`` is the
    engine stage's engine.json (the only source of a DLA core in ``where``); ``log`` takes progress lines."""

    def __init__(self, device, engine, onnx, *, engine_manifest=None, dla_core=None, power=False, transport=None,
                 log=_noop):
        from pipeline.backends.device import DeviceSession

        self.device, self.transport, self.log = device, transport, log
        self.engine_manifest = engine_manifest  # the engine stage's engine.json: the engine's DLA placement
        self.model_path, self.backend = model_for(device, engine, onnx)
        remote_model = self.device.transport.send(self.model_path)
        self.session = DeviceSession(self.device, remote_model, self.backend, dla_core=dla_core)
        self.inputs = self.session.inputs
        self.request = {"model": remote_model, "backend": self.backend, "dla_core": self.session.request["dla_core"],
                        "power": bool(power)}
        self.probe = {}

    @property
    def board(self):
        return self.probe.get("board")

    def send_array(self, array):
        import numpy as np

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "images.npy"
            np.save(path, np.ascontiguousarray(array, dtype=np.float32))
            return self.device.transport.send(path)

    def benchmark(self, request):
        self.log("benchmark: {} on {} ({})".format(self.model_path.name, self.device.describe(),
                                                                self.backend))
        answer = self.device.call(request, what="the benchmark")
        self.probe = self.device.probe()
        return answer

    def where(self, label, target):
        where = {"device": self.device.describe(), "transport": self.transport,
                 "fingerprint": fingerprint(self.probe)}
        hardware = hardware_label(self.probe)
        if hardware:
            where["hardware"] = hardware  # "desktop GPU (NVIDIA GeForce RTX 4090), not a Jetson"
        warnings = noise_warnings(self.probe) if self.backend == "tensorrt" else []
        if warnings:
            where["warnings"] = warnings
            for w in warnings:
                self.log("warning: " + w)
        if self.backend == "tensorrt" and self.engine_manifest is not None:
            where.update(dla_fields(self.engine_manifest))
        return where

    def note(self, label, target):
        return "{} via the device agent on {} ({}); not {} numbers".format(
            label.get("runtime"), self.device.describe(), hardware_label(self.probe) or "unknown machine", target.name)

    def short(self, label):
        machine = self.probe.get("board") or ("desktop-gpu" if self.probe.get("kind") == "desktop-gpu" else None)
        return "{}/{}".format(machine or self.probe.get("hostname") or "device", label.get("runtime"))

    def close(self):
        pass


def dla_fields(engine_json):
    """``dla`` from the engine stage's engine.json (what the build found: layers on DLA / GPU); ``dla_core``
    only when the engine runs (at least partly) on that core: never a DLA core for a GPU engine."""
    import json

    try:
        dla = json.loads(Path(engine_json).read_text(encoding="utf-8")).get("dla")
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(dla, dict):
        return {}
    out = {"dla": dla}
    if dla.get("runs_on") in ("dla", "mixed") and dla.get("core") is not None:
        out["dla_core"] = dla["core"]
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
