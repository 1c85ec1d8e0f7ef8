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
