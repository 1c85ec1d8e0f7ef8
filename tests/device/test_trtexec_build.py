"""builder: trtexec — the flags per TensorRT version, and a build through a stand-in trtexec that
replays a real captured trtexec log (the parse, the atomic engine write, the failure line)."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from pipeline.device.agent import AgentError
from pipeline.device.agent.trtexec_build import build, command

SAMPLES = Path(__file__).parent / "samples" / "trtexec"
PROFILE = {"input": {"min": [1, 32, 32, 3], "opt": [4, 32, 32, 3], "max": [8, 32, 32, 3]}}


def _request(tmp_path, **kw):
    base = {"onnx": "m.onnx", "engine": str(tmp_path / "m.engine"), "precision": "fp16", "workspace_mb": 512,
            "profile": PROFILE, "timing_cache": str(tmp_path / "timing.cache"), "log": str(tmp_path / "build.log")}
    base.update(kw)
    return base


def test_tensorrt_8_2_uses_workspace_and_shapes(tmp_path):
    argv = command("trtexec", _request(tmp_path, tensorrt="8.2.1"), "out.tmp")
    assert "--workspace=512" in argv and not any(a.startswith("--memPoolSize") for a in argv)
    assert "--minShapes=input:1x32x32x3" in argv and "--maxShapes=input:8x32x32x3" in argv
    assert "--fp16" in argv and "--timingCacheFile=" + str(tmp_path / "timing.cache") in argv


def test_tensorrt_8_5_and_10_use_memory_pools(tmp_path):
    for version in ("8.5.2", "10.3.0"):
        argv = command("trtexec", _request(tmp_path, tensorrt=version, profile={}), "out.tmp")
        assert "--memPoolSize=workspace:512M" in argv and "--workspace=512" not in argv
        assert ("--explicitBatch" in argv) == (version == "8.5.2")  # implicit on < 10 unless asked; always explicit on 10


def test_dla_and_int8_flags(tmp_path):
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-8201-EntropyCalibration2\n")
    argv = command("trtexec", _request(tmp_path, tensorrt="8.5.2", precision="int8", dla_core=1,
                                       calibration={"cache": str(cache)}), "out.tmp")
    assert "--int8" in argv and "--calib=" + str(cache) in argv
    assert "--useDLACore=1" in argv and "--allowGPUFallback" in argv


def test_int8_without_a_calibration_cache_says_what_to_do(tmp_path):
    with pytest.raises(AgentError, match="builder: python build first"):
        command("trtexec", _request(tmp_path, tensorrt="8.5.2", precision="int8", calibration={}), "out.tmp")


def _stand_in(tmp_path, log, exit_code=0, write_engine=True):
    """An executable that prints a captured trtexec log and writes --saveEngine like trtexec would."""
    script = tmp_path / "trtexec"
    script.write_text("#!{}\nimport sys\nsys.stdout.write(open({!r}).read())\n"
                      "args = [a for a in sys.argv if a.startswith('--saveEngine=')]\n"
                      "if {!r} and args:\n    open(args[0].split('=', 1)[1], 'wb').write(b'plan' * 100)\n"
                      "sys.exit({})\n".format(sys.executable, str(log), write_engine, exit_code))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_build_parses_the_log_of_the_run_and_writes_the_engine_atomically(tmp_path):
    log = SAMPLES / "8.5.2_jetson-agx-xavier.log"
    result = build(_request(tmp_path, tensorrt="8.5.2", trtexec=_stand_in(tmp_path, log)))
    assert result["builder"] == "trtexec" and result["engine_bytes"] == 400
    assert result["trtexec"]["summary"]["throughput_qps"] > 0
    assert Path(result["trtexec"]["command"][0]).name.startswith("--onnx=") or result["trtexec"]["command"][0] == "--onnx=m.onnx"
    assert (tmp_path / "m.engine").exists() and not (tmp_path / "m.engine.tmp").exists()
    assert (tmp_path / "build.log").read_text() == log.read_text()
    json.dumps(result)


def test_a_failed_build_leaves_no_engine(tmp_path):
    log = SAMPLES / "8.5.2_jetson-agx-xavier.log"
    with pytest.raises(AgentError) as err:
        build(_request(tmp_path, tensorrt="8.5.2", trtexec=_stand_in(tmp_path, log, exit_code=1)))
    assert "trtexec exited 1" in str(err.value)
    assert not os.path.exists(tmp_path / "m.engine") and not os.path.exists(tmp_path / "m.engine.tmp")


def test_trtexec_never_gets_the_agents_stdin(tmp_path):
    """D12: the agent's stdin carries the host's requests; a child reading it would eat the next one."""
    if not os.path.exists("/proc/self/fd/0"):
        pytest.skip("needs /proc")
    seen = tmp_path / "stdin.txt"
    script = tmp_path / "trtexec"
    script.write_text("#!{}\nimport os, sys\nopen({!r}, 'w').write(os.readlink('/proc/self/fd/0'))\n"
                      "sys.stdout.write(open({!r}).read())\n"
                      "args = [a for a in sys.argv if a.startswith('--saveEngine=')]\n"
                      "open(args[0].split('=', 1)[1], 'wb').write(b'plan')\n".format(
                          sys.executable, str(seen), str(SAMPLES / "8.5.2_jetson-agx-xavier.log")))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    read, write = os.pipe()  # the agent's stdin is the host's request pipe, as in --serve
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        build(_request(tmp_path, tensorrt="8.5.2", trtexec=str(script)))
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read, write):
            os.close(fd)
    assert seen.read_text() == "/dev/null"


def test_dla_with_fp32_is_refused_by_trtexec_too(tmp_path):
    with pytest.raises(AgentError, match="DLA runs fp16 and int8 only"):
        command("trtexec", _request(tmp_path, tensorrt="8.5.2", precision="fp32", dla_core=0), "out.tmp")


def _dla_stand_in(tmp_path, log_lines, layers=None):
    """A trtexec that prints ``log_lines`` and, given --exportLayerInfo, writes ``layers`` as the inspector's JSON."""
    log = tmp_path / "dla.log"
    log.write_text("\n".join(log_lines) + "\n")
    script = tmp_path / "trtexec"
    script.write_text("#!{}\nimport json, sys\nsys.stdout.write(open({!r}).read())\n"
                      "opts = dict(a[2:].split('=', 1) for a in sys.argv[1:] if '=' in a)\n"
                      "open(opts['saveEngine'], 'wb').write(b'plan')\n"
                      "if {!r} is not None and 'exportLayerInfo' in opts:\n"
                      "    json.dump({{'Layers': {!r}, 'Bindings': []}}, open(opts['exportLayerInfo'], 'w'))\n".format(
                          sys.executable, str(log), layers, layers))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


STATIC = {"input": {"min": [4, 32, 32, 3], "opt": [4, 32, 32, 3], "max": [4, 32, 32, 3]}}


def test_a_trtexec_dla_build_gets_its_placement_from_the_inspector_json(tmp_path):
    """Review N3/N5: trtexec DLA builds were labelled with the requested core unchecked. Now
    --profilingVerbosity=detailed --exportLayerInfo (trtexec 8.2+) says where the layers ran."""
    argv = command("trtexec", _request(tmp_path, tensorrt="8.5.2", dla_core=1, profile=STATIC), "m.tmp")
    assert "--profilingVerbosity=detailed" in argv and "--exportLayerInfo=m.tmp.layers.json" in argv
    on_gpu = [{"Name": "Conv_0", "LayerType": "Convolution"}, {"Name": "Softmax_7", "LayerType": "SoftMax"}]
    result = build(_request(tmp_path, tensorrt="8.5.2", dla_core=1, profile=STATIC,
                            trtexec=_dla_stand_in(tmp_path, ["&&&& PASSED TensorRT.trtexec [TensorRT v8502] # x"],
                                                  on_gpu)))
    assert result["dla"]["runs_on"] == "gpu" and result["dla"]["source"] == "engine_inspector"
    assert result["dla_core"] is None  # never labelled with a core it did not use
    on_dla = [{"Name": "input to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[Conv_0...Softmax_7]}"},
              {"Name": "probabilities from nvm", "LayerType": "Reformat"}]
    result = build(_request(tmp_path, tensorrt="8.5.2", dla_core=1, profile=STATIC,
                            trtexec=_dla_stand_in(tmp_path, ["&&&& PASSED TensorRT.trtexec [TensorRT v8502] # x"],
                                                  on_dla)))
    assert result["dla"] == {"core": 1, "layers_on_dla": 1, "layers_on_gpu": 0, "io_layers": 2, "runs_on": "dla",
                             "source": "engine_inspector"}
    assert result["dla_core"] == 1 and not list(tmp_path.glob("*.layers.json"))


def test_a_trtexec_dla_build_without_the_json_reads_its_log(tmp_path):
    """trtexec 8.0 has no --exportLayerInfo: the build log's summary (TensorRT 10's one-line format here)."""
    argv = command("trtexec", _request(tmp_path, tensorrt="8.0.1", dla_core=0, profile=STATIC), "m.tmp")
    assert not any(a.startswith(("--exportLayerInfo", "--profilingVerbosity")) for a in argv)
    log = ["[11/28/2026-01:02:03] [I] [TRT] --------------- Layers running on DLA:",
           "[11/28/2026-01:02:03] [I] [TRT] [DlaLayer] {ForeignNode[Conv_0...Relu_5]}, ",
           "[11/28/2026-01:02:03] [I] [TRT] --------------- Layers running on GPU:",
           "[11/28/2026-01:02:03] [I] [TRT] [GpuLayer] SOFTMAX: Softmax_7, ",
           "&&&& PASSED TensorRT.trtexec [TensorRT v8001] # x"]
    result = build(_request(tmp_path, tensorrt="8.0.1", dla_core=0, profile=STATIC,
                            trtexec=_dla_stand_in(tmp_path, log)))
    assert result["dla"] == {"core": 0, "layers_on_dla": 1, "layers_on_gpu": 1, "io_layers": 0, "runs_on": "mixed",
                             "source": "build_log"}
    assert result["dla_core"] == 0


def test_tensorrt_11_trtexec_has_no_precision_flags(tmp_path):
    """trtexec @v11.1 (samples/common/sampleOptions.cpp) parses no --fp16 and no --calib (--int8 only in the
    safety builder): fp32 as is (--noTF32), fp16 from a model the host typed, int8 refused in one line."""
    argv = command("trtexec", _request(tmp_path, tensorrt="11.1.0", precision="fp32", profile={}), "m.tmp")
    assert "--noTF32" in argv and not {"--fp16", "--int8", "--explicitBatch"} & set(argv)
    argv = command("trtexec", _request(tmp_path, tensorrt="11.1.0", typed="fp16"), "m.tmp")
    assert not {"--fp16", "--int8"} & set(argv)
    with pytest.raises(AgentError, match="strongly typed networks only") as err:
        command("trtexec", _request(tmp_path, tensorrt="11.1.0"), "m.tmp")
    assert err.value.kind == "build-failed"
    with pytest.raises(AgentError, match="removed the int8 calibrator"):
        command("trtexec", _request(tmp_path, tensorrt="11.1.0", precision="int8",
                                    calibration={"cache": str(tmp_path / "none")}), "m.tmp")


def test_a_tensorrt_newer_than_deploy_knows_is_refused_by_name(tmp_path):
    with pytest.raises(AgentError, match=r"TensorRT 12\.0\.1 is newer than the TensorRT APIs this deploy knows"):
        command("trtexec", _request(tmp_path, tensorrt="12.0.1"), "m.tmp")
