"""Progress output: lines for humans, bars on a terminal only, JSON events on stdout."""

import io
import json

from pipeline.progress import Progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_human_lines_and_no_bar_off_a_terminal():
    stream = io.StringIO()
    progress = Progress("human", stream=stream)
    progress.log("train     running")
    with progress.bar(total=3, desc="train") as bar:
        bar.update(3)
    assert stream.getvalue() == "train     running\n"


def test_bar_on_a_terminal():
    stream = Tty()
    with Progress("human", stream=stream).bar(total=2, desc="bench") as bar:
        bar.update(2)
    assert "bench" in stream.getvalue()


def test_quiet_prints_nothing(capsys):
    progress = Progress("quiet", stream=Tty())
    progress.log("hello")
    progress.event("stage", stage="train")
    with progress.bar(total=1) as bar:
        bar.update()
    assert progress.stream.getvalue() == "" and capsys.readouterr().out == ""


def test_json_events_on_stdout(capsys):
    progress = Progress("json", stream=io.StringIO())
    progress.log("not for machines")
    progress.event("stage", stage="train", status="ran")
    line = capsys.readouterr().out.strip()
    event = json.loads(line)
    assert event["event"] == "stage" and event["stage"] == "train" and event["status"] == "ran"
    assert progress.stream.getvalue() == ""


def test_a_slow_step_says_what_it_does_on_stderr_a_quick_one_says_nothing(capsys):
    """Issue 26 item 2: a step that runs past its threshold names itself on stderr, then its time; a quick
    step prints nothing; quiet prints nothing; stdout never; no thread is left behind."""
    import threading
    import time

    from pipeline.progress import Progress

    threads = threading.active_count()
    progress = Progress("human", bars=False)
    with progress.step("reading quick.pb", after=0.5):
        pass
    with progress.step("converting big.pb with tf2onnx at opset 13 (2 of 12)", after=0.05):
        time.sleep(0.3)
    out, err = capsys.readouterr()
    assert out == ""
    assert "quick.pb" not in err
    lines = err.splitlines()
    assert lines[0] == "converting big.pb with tf2onnx at opset 13 (2 of 12) ..."
    assert lines[1].startswith("converting big.pb with tf2onnx at opset 13 (2 of 12): done in ")
    with Progress("quiet").step("anything", after=0.01):
        time.sleep(0.1)
    assert capsys.readouterr() == ("", "")
    assert threading.active_count() == threads  # pipeline.check.background forks only without other threads


def test_the_threshold_is_2_s_unless_set_and_0_names_every_step_at_once(monkeypatch, capsys):
    """Issue 26 item 2: $DEPLOY_PROGRESS_AFTER moves the threshold (0: every step, named when it starts, with
    no timer thread); a step's notes show only once it has named itself (the latest one with its name)."""
    import threading

    from pipeline.progress import AFTER_ENV, Progress, step_after

    monkeypatch.delenv(AFTER_ENV, raising=False)
    assert step_after() == 2.0
    monkeypatch.setenv(AFTER_ENV, "not a number")
    assert step_after() == 2.0
    monkeypatch.setenv(AFTER_ENV, "30")
    with Progress("human", bars=False).step("reading quick.pb") as step:
        step.note("image 1/2 done")
    assert capsys.readouterr() == ("", "")
    monkeypatch.setenv(AFTER_ENV, "0")
    threads = threading.active_count()
    with Progress("human", bars=False).step("reading slow.pb") as step:
        assert threading.active_count() == threads
        step.note("image 1/2 done")
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines[:2] == ["reading slow.pb ...", "  image 1/2 done"]
    assert lines[2].startswith("reading slow.pb: done in ") and len(lines) == 3
    step = Progress("human", bars=False).step("converting", after=60)
    with step:
        step.note("about 40 s")
        step.note("image 1/2 done")
        step._say()  # what the timer does once the step has run past its threshold
    assert capsys.readouterr().err.splitlines()[:2] == ["converting ...", "  image 1/2 done"]


def test_a_step_whose_work_was_refused_does_not_close_with_done(monkeypatch, capsys, tmp_path):
    """deploy check on a graph the screen refuses (a PyFunc): the conversion step closed "done in 3.8 s" above a
    report saying tf2onnx was not run; its closing word is now what happened. Through convert_probe.convert, the
    worker's answer replaced (a refusal needs TensorFlow in the worker)."""
    from types import SimpleNamespace

    from pipeline.check import convert_probe
    from pipeline.progress import AFTER_ENV, Progress

    monkeypatch.setenv(AFTER_ENV, "0")  # every step named, at once
    answers = iter([SimpleNamespace(status="refused"), SimpleNamespace(status="converted")])
    monkeypatch.setattr(convert_probe, "convert_on", lambda worker, path, opset, timeout=None: next(answers))
    monkeypatch.setattr(convert_probe, "_shared_worker", lambda big: None)
    for name in ("m.pb", "n.pb"):
        (tmp_path / name).write_bytes(b"graph " + name.encode())
        with convert_probe.reporting(Progress("human", bars=False), name):
            convert_probe.convert(str(tmp_path / name), 13)
    lines = capsys.readouterr().err.splitlines()
    assert lines[1].startswith("converting m.pb with tf2onnx at opset 13: refused (not converted) in "), lines
    assert lines[3].startswith("converting n.pb with tf2onnx at opset 13: done in "), lines
