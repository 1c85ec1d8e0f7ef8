"""The host's view of a device: a transport, the board's identity asked once, and the check that the
board is the one the target file describes. A Device is a value: whoever opens it passes it on and
closes it (a stage opens the run's device for its own work and closes it when it ends: no agent, no
ssh connection outlives the stage that needed it).

    with open_device(config, progress) as device:
        device.ping()                          # {python, has: {tensorrt, onnxruntime, numpy, uff}} (fast)
        device.probe()                         # the full identity (pipeline/device/agent/probe.py)
        device.check_tensorrt(target)          # error (or warning) when the board's TensorRT differs
"""

from pathlib import Path

from pipeline.device.errors import DeviceError
from pipeline.device.transport import agent_python


def open_device(config, progress=None):
    """The Device of ``config.device`` (its agent's interpreter and run folder from ``config``); close it, or use
    it in a ``with`` block."""
    return Device(config.device, progress, python=python_for(config), run_dir=run_folder(config))


def run_folder(config):
    """The run folder of ``config`` (run.dir/run.name) when it exists (ssh keeps its control socket there), else None."""
    run = getattr(config, "run", None)
    if run is None:
        return None
    folder = Path(run.dir) / run.name
    return folder if folder.is_dir() else None


def python_for(config):
    """The agent's interpreter for ``config`` (transport.agent_python): a relative ``device.python`` counts
    from the folder of the config file that sets it (with ``extends``, the file that has the key; with
    ``--set``, the current folder)."""
    keypath = ("device", "python")
    where = config.where(*keypath) if hasattr(config, "where") else "device.python"
    return agent_python(config.device, base=setting_folder(config, where), where=where)


def setting_folder(config, where):
    """The folder a relative path counts from, given ``where`` the config says a setting comes from
    (``Config.where``: "file:line", or "--set"): that file's folder; the current folder for --set; else the
    config file's folder."""
    if where == "--set":
        return Path.cwd()
    file, colon, line = str(where or "").rpartition(":")
    if colon and line.isdigit() and file:
        return Path(file).parent
    path = getattr(config, "path", None)
    return Path(path).parent if path else Path.cwd()


class Device:
    def __init__(self, cfg, progress=None, python=None, run_dir=None):
        self.cfg = cfg
        self.transport = open_transport(cfg, progress, python, run_dir)
        self._ping = None
        self._probe = None

    def describe(self):
        return self.transport.describe()

    def close(self, kill=False):
        """Stop the agent and the connection: its stdin closed, or at once with ``kill``; then SIGTERM and SIGKILL
        for what is left (pipeline.device.process)."""
        self.transport.close(kill=kill)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # interrupted (Ctrl-C, or deploy's SIGTERM, which pipeline.cli raises as a KeyboardInterrupt): a busy agent
        # would not notice its stdin closing, so it is stopped at once
        self.close(kill=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))
        return False

    def call(self, request, timeout=None, what=None):
        return self.transport.call(request, timeout=timeout, what=what)

    def ping(self):
        if self._ping is None:
            ping = self._object(self.call({"command": "ping"}, timeout=60, what="ping"), "ping")
            if not isinstance(ping.get("has", {}), dict):
                raise self._not_agent("ping", "has", ping.get("has"))
            self._ping = ping
        return self._ping

    def probe(self):
        if self._probe is None:
            self._probe = self._object(self.call({"command": "probe"}, timeout=120, what="probe"), "probe")
        return self._probe

    def _object(self, result, what):
        """The agent's result for ``what`` when it is a JSON object, else a one-line DeviceError."""
        if not isinstance(result, dict):
            raise self._not_agent(what, "result", result)
        return result

    def _not_agent(self, what, key, value):
        shown = repr(value)
        return DeviceError("the agent on {} answered {} with {} {} where an object belongs; is {} running this "
                           "deploy's agent?".format(self.describe(), what, key, shown if len(shown) < 80 else
                                                    shown[:77] + "...", self.transport.python_setting()))

    def has(self, module):
        return bool((self.ping().get("has") or {}).get(module))

    def backend(self):
        """The backend the benchmark uses there: device.backend, or auto's choice. An interpreter without
        numpy (the agent's one need for any model) is one line naming it and device.python."""
        if not self.has("numpy"):
            exe = self.ping().get("executable") or self.transport.python
            raise DeviceError("{} on {} has no numpy, which the agent needs to run a model: install it for that "
                              "interpreter ({} -m pip install 'numpy<1.24' on JetPack 4/5, 'numpy<2' on JetPack 6), or "
                              "set device.python to a Python 3.6+ with numpy and TensorRT or onnxruntime".format(
                                  self.transport.python_setting(), self.describe(), exe))
        if self.cfg.backend != "auto":
            if self.cfg.backend == "tensorrt" and not self.has("tensorrt"):
                raise DeviceError("device.backend is tensorrt but TensorRT's Python bindings are not on {} ({}); "
                                  "install python3-libnvinfer there, or set device.backend: onnxruntime".format(
                                      self.describe(), self.ping().get("executable")))
            return self.cfg.backend
        return "tensorrt" if self.has("tensorrt") else "onnxruntime"

    def check_tensorrt(self, target, warn=None):
        """The board's TensorRT against the target file's: an error, or a warning string with
        ``device.on_version_mismatch: warn``; None when they agree."""
        found = self.probe().get("tensorrt")
        expected = target.tensorrt
        if not found or not expected or same_version(found, expected):
            return None
        message = ("the board {} has TensorRT {} but target {} says {} (JetPack {}): an engine is only valid for the "
                   "TensorRT it was built with; pick the target that matches the board (deploy device probe), or set "
                   "device.on_version_mismatch: warn".format(self.describe(), found, target.name, expected, target.jetpack))
        if self.cfg.on_version_mismatch == "warn":
            if warn is not None:
                warn("warning: " + message)
            return message
        raise DeviceError(message)


def same_version(found, expected):
    """'8.2.1.8' matches '8.2.1' and '8.2'; '8.5.2' does not match '8.2.1'."""
    want = str(expected).split(".")
    return str(found).split(".")[:len(want)] == want


# The probe's facts a run records about its machine (benchmark.json's where.fingerprint, engine.json's device);
# pipeline/report/machine.py reads a run's fingerprint by these names and no others.
FINGERPRINT_FIELDS = ("kind", "gpu", "gpu_driver", "board", "model", "l4t", "jetpack", "tensorrt", "cuda", "cudnn",
                      "python", "power_mode", "clocks_locked", "hostname", "machine")


def fingerprint(probe):
    """The facts that make a benchmark's numbers what they are (stored in benchmark.json). ``kind`` is
    "jetson", "desktop-gpu" (an NVIDIA GPU that is not a Jetson's) or "cpu"; ``gpu`` is nvidia-smi's name."""
    return {k: probe.get(k) for k in FINGERPRINT_FIELDS}


def hardware_label(facts):
    """What the machine is, in words, for benchmark.json's ``where`` and the report: "desktop GPU (NVIDIA
    GeForce RTX 4090), not a Jetson", "Jetson (jetson_tx2)", "CPU only, not a Jetson" (``facts``: a probe or
    a fingerprint)."""
    kind = facts.get("kind")
    if kind == "desktop-gpu":
        return "desktop GPU ({}), not a Jetson".format(facts.get("gpu") or "NVIDIA")
    if kind == "jetson" or (kind is None and (facts.get("l4t") or facts.get("board"))):
        return "Jetson ({})".format(facts.get("board") or facts.get("model") or "board unknown")
    if kind == "cpu":
        return "CPU only, not a Jetson"
    return None


def open_transport(cfg, progress=None, python=None, run_dir=None):
    """The transport of a device: section; ``python`` is the agent's interpreter (``agent_python``); ``run_dir``
    the run folder (ssh keeps its control socket there)."""
    if cfg.transport == "ssh":
        from pipeline.device.ssh import SshTransport

        return SshTransport(cfg, progress, python, run_dir)
    from pipeline.device.transport import LocalTransport

    return LocalTransport(cfg, progress, python, run_dir)
