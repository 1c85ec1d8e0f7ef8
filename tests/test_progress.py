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
