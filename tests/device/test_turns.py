"""One benchmark at a time on a machine (issue 28, item 3: the runner machine that is itself a board): every
deploy benchmark takes the machine's benchmark turn, a run that has to wait says so and names the holder, and
the turn file is never opened through a link, a hard link or a FIFO."""

import os
import subprocess
import sys
import textwrap
import time
import types

import pytest

from pipeline.device.errors import DeviceError
from pipeline.device.turns import ENV, benchmark_turn

HOLD = textwrap.dedent("""
    import sys, time
    from pipeline.device.turns import benchmark_turn
    with benchmark_turn():
        print("holding", flush=True)
        time.sleep(float(sys.argv[1]))
        print("releasing", time.time(), flush=True)  # still holding it: whoever gets it next gets it after this
""")


@pytest.fixture
def turn_file(tmp_path, monkeypatch):
    path = tmp_path / "benchmark.lock"
    monkeypatch.setenv(ENV, str(path))
    return path


def _holder(seconds):
    """Another deploy process holding the machine's turn for ``seconds`` (it has it when this returns)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(seconds)], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_a_second_benchmark_waits_for_the_turn_and_says_who_holds_it(turn_file):
    holder = _holder(1.5)
    lines = []
    with benchmark_turn(lines.append, poll_s=0.05):
        got = time.time()
    released = float(holder.stdout.readline().split()[1])
    holder.wait(timeout=10)
    assert got >= released  # never both at once
    assert "waiting for the machine's benchmark turn (process {} holds {})".format(holder.pid, turn_file) in lines[0]
    assert lines[1].startswith("benchmark: got the machine's benchmark turn after")


def test_the_turn_is_free_again_when_its_holder_is_killed(turn_file):
    holder = _holder(60)
    holder.kill()
    holder.wait(timeout=10)
    lines = []
    with benchmark_turn(lines.append, poll_s=0.05):
        pass
    assert lines == []  # the kernel dropped the dead process's lock: no wait


def test_the_benchmark_stage_takes_the_turn(turn_file, tmp_path):
    """The stage's timed loop does not start while another run holds the machine's turn."""
    pytest.importorskip("onnxruntime")
    from pipeline.stages import StageContext
    from pipeline.stages.benchmark import benchmark

    from devicekit import tiny_onnx

    lines = []
    opts = types.SimpleNamespace(batch_sizes=[1], warmup=1, iterations=2, duration_s=None, inputs="random",
                                 consistency=False)
    ctx = StageContext(name="benchmark", out_dir=tmp_path / "out", inputs={"onnx": tiny_onnx(tmp_path / "m.onnx")},
                       options=opts, config=types.SimpleNamespace(dataset=None, device=None,
                                                                   stages=types.SimpleNamespace(engine=None)),
                       target=types.SimpleNamespace(name="host_cpu", runtime="onnxruntime"),
                       progress=types.SimpleNamespace(log=lines.append, bar=lambda *a, **k: None))
    holder = _holder(1.5)
    benchmark(ctx)
    released = float(holder.stdout.readline().split()[1])
    holder.wait(timeout=10)
    assert any("waiting for the machine's benchmark turn" in line for line in lines)
    assert (tmp_path / "out" / "benchmark.json").stat().st_mtime >= released


def test_a_link_a_hard_link_or_a_fifo_is_refused(turn_file, tmp_path):
    outside = tmp_path / "someone's file"
    outside.write_text("keep me\n")
    os.symlink(str(outside), str(turn_file))
    with pytest.raises(DeviceError, match="is a link"):
        with benchmark_turn():
            pass
    turn_file.unlink()
    os.link(str(outside), str(turn_file))
    with pytest.raises(DeviceError, match="hard link"):
        with benchmark_turn():
            pass
    assert outside.read_text() == "keep me\n"
    turn_file.unlink()
    os.mkfifo(str(turn_file))
    started = time.monotonic()
    with pytest.raises(DeviceError, match="not a regular file"):
        with benchmark_turn():
            pass
    assert time.monotonic() - started < 5  # refused at once, not blocked on the FIFO
