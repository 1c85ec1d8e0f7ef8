"""``stages.engine.builder: trtexec``: build with NVIDIA's trtexec instead of the Python API — an
alternative where the bindings are broken, and a cross-check of the Python build (trtexec times the
engine it built; its summary is parsed by ``trtexec.parse_log`` for every format from 7.x to 10.x).

Flags by TensorRT version (the ``getAndDelOption`` calls of samples/common/sampleOptions.cpp in
github.com/NVIDIA/TensorRT at each release tag; tests/device/samples/trtexec/PROVENANCE.md lists them):
``--workspace=MB`` up to 8.x, ``--memPoolSize=workspace:MB`` from 8.4 (``--workspace`` is gone in 10.0);
shapes as ``name:1x32x32x3``; ``--timingCacheFile`` from 8.0; DLA with ``--useDLACore=N --allowGPUFallback``
and, from 8.2, ``--profilingVerbosity=detailed --exportLayerInfo=FILE`` (the engine inspector's JSON: where the
layers run, ``trt_dla.placement_from_file``; below 8.2 the log's summary). TensorRT 11's trtexec has no
``--fp16`` / ``--calib`` (``--int8`` only for the safety builder): fp16 comes from a model the host typed fp16,
int8 is refused (``trt_precision.strongly_typed_precision``); a TensorRT newer than the agent knows is refused.
"""

import hashlib
import os
import shutil
import subprocess
import time

from . import AgentError, ParseError, say
from .trt_dla import placement_from_file
from .trt_engine import EngineError, newer_than_known, precision_flags
from .trt_precision import STRONGLY_TYPED_FROM, strongly_typed_precision

CANDIDATES = ("/usr/src/tensorrt/bin/trtexec", "/usr/local/bin/trtexec")


def find_trtexec(explicit=None):
    for path in [explicit, shutil.which("trtexec")] + list(CANDIDATES):
        if path and os.path.exists(path):
            return path
    raise AgentError("no-trtexec", "trtexec is not on this device (JetPack puts it in /usr/src/tensorrt/bin); "
                                   "set stages.engine.builder: python")


def _version(text):
    try:
        return tuple(int(x) for x in str(text).split(".")[:2])
    except ValueError:
        return (8, 0)


def _dims(shape):
    return "x".join(str(d) for d in shape)


def layer_info_path(engine_tmp):
    return engine_tmp + ".layers.json"


def command(exe, request, engine_tmp):
    """The trtexec argv for a build request (see the module docstring for the flags per version)."""
    version = _version(request.get("tensorrt") or "8.0")
    refused = newer_than_known(request.get("tensorrt") or "8.0")
    if refused:
        raise AgentError("build-failed", refused)
    if request.get("dla_core") is not None and request.get("precision") not in ("fp16", "int8"):
        raise AgentError("build-failed", "DLA runs fp16 and int8 only: set stages.engine.precision: fp16 (or int8)")
    argv = [exe, "--onnx=" + request["onnx"], "--saveEngine=" + engine_tmp]
    profile = request.get("profile") or {}
    if profile:
        for key, flag in (("min", "--minShapes="), ("opt", "--optShapes="), ("max", "--maxShapes=")):
            argv.append(flag + ",".join("{}:{}".format(name, _dims(p[key])) for name, p in sorted(profile.items())))
    if version < (10, 0) and not profile:
        argv.append("--explicitBatch")
    workspace = int(request.get("workspace_mb", 1024))
    argv.append("--memPoolSize=workspace:{}M".format(workspace) if version >= (8, 4) else "--workspace={}".format(workspace))
    precision = request.get("precision", "fp16")
    if precision == "int8" and version < STRONGLY_TYPED_FROM:
        calibration = request.get("calibration") or {}
        cache = calibration.get("cache")
        if not cache or not os.path.exists(cache):
            raise AgentError("build-failed", "trtexec cannot calibrate from images: int8 with builder trtexec needs the "
                                             "calibration cache of a builder: python build first")
        argv.append("--calib=" + cache)
    # the Python builder's flags for the same precision (fp16 beside int8 where the target has fast fp16:
    # the host sends the target's answer as "fast_fp16"), so both builders make the same mixed engine
    fast_fp16 = request.get("fast_fp16", True)
    try:
        if version >= STRONGLY_TYPED_FROM:  # the precision is the model's types: no flag
            strongly_typed_precision(request.get("tensorrt"), precision, request.get("typed"))
        else:
            argv += ["--" + flag for flag in precision_flags(precision, fast_fp16, True)]
    except EngineError as e:
        raise AgentError("build-failed", str(e))
    if precision == "fp32":
        argv.append("--noTF32")  # as the Python builder: TF32 is on by default from Ampere; fp32 means fp32
    if request.get("dla_core") is not None:
        argv += ["--useDLACore={}".format(request["dla_core"]), "--allowGPUFallback"]
        if version >= (8, 2):  # where the layers ran: the inspector's JSON of the engine it built
            argv += ["--profilingVerbosity=detailed", "--exportLayerInfo=" + layer_info_path(engine_tmp)]
    if request.get("timing_cache") and version >= (8, 0):
        argv.append("--timingCacheFile=" + request["timing_cache"])
    return argv


def build(request):
    from .trtexec import parse_log

    exe = find_trtexec(request.get("trtexec"))
    engine = request["engine"]
    tmp = engine + ".tmp"
    argv = command(exe, request, tmp)
    say("trtexec: " + " ".join(argv[1:]))
    started = time.time()
    # stdin: never the agent's (the host's requests arrive there)
    res = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = res.stdout.decode("utf-8", "replace")
    if request.get("log"):
        with open(request["log"], "w") as f:
            f.write(text)
    try:
        parsed = parse_log(text)
    except ParseError as e:
        parsed = {"summary": None, "errors": ["trtexec output not understood: {}".format(e)]}
    if res.returncode != 0 or not os.path.exists(tmp):
        if os.path.exists(tmp):
            os.remove(tmp)
        errors = parsed.get("errors") or [line for line in text.splitlines() if line.strip()][-1:]
        raise AgentError("build-failed", "trtexec exited {}: {}".format(res.returncode, errors[-1] if errors else "no output"))
    os.replace(tmp, engine)
    with open(engine, "rb") as f:
        data = f.read()
    dla = None
    if request.get("dla_core") is not None:
        dla = placement_from_file(int(request["dla_core"]), layer_info_path(tmp), text.splitlines())
        if os.path.exists(layer_info_path(tmp)):
            os.remove(layer_info_path(tmp))
    result = {"builder": "trtexec", "tensorrt_version": parsed.get("tensorrt_version"),
              "precision": request.get("precision"), "build_s": time.time() - started, "engine_bytes": len(data),
              "engine_sha256": hashlib.sha256(data).hexdigest(),
              "trtexec": {"command": argv[1:], "summary": parsed.get("summary"), "warnings": parsed.get("warnings", [])},
              # dla_core only where layers run on the DLA: a GPU engine is never labelled with a core
              "dla_core": dla["core"] if dla is not None and dla["runs_on"] in ("dla", "mixed") else None,
              "dla_fallback_layers": None, "typed": request.get("typed")}
    if dla is not None:
        result["dla"] = dla
    return result
