"""deploy report: the HTML page and the Markdown summary from run folders; bad input."""

import json
import os
import re

import pytest

from pipeline.errors import DeployError
from pipeline.report import markdown_report, write_report
from pipeline.report.collect import expand_history, load_run

from conftest import deploy
from reportkit import make_run


def test_full_run_has_every_section_and_is_self_contained(tmp_path):
    run = make_run(tmp_path / "runs" / "tx2")
    page = write_report(run).read_text()
    for heading in ("Stages", "Device", "Check: will it convert?", "Rewrite receipt", "Accuracy against the reference",
                    "Latency and throughput", "Where the time goes", "Power and energy", "Batch consistency", "Training"):
        assert re.search(r"<h[23]>{}[ <]".format(re.escape(heading)), page), heading
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<script" not in page
    # no reference that would make a request: every URL in the page is an XML namespace
    urls = re.findall(r"""(?:src|href|url)\s*[=(]\s*["']?([^"') >]+)""", page)
    assert urls and [u for u in urls if not u.startswith("#")] == []  # only references inside the SVGs
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) == {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    assert page.count("<svg") == 4  # latency CDF, throughput, power, training
    assert "97.0%" not in page and "99.0%" in page  # top-1 agreement of the engine
    assert "MAXN" in page and "8.2.1" in page and "tx2.lab" in page


def test_plots_are_cached_and_deterministic(tmp_path):
    run = make_run(tmp_path / "tx2")
    first = write_report(run).read_text()
    cache = sorted((run / ".report").iterdir())
    assert len(cache) == 4
    inodes = [p.stat().st_ino for p in cache]  # a redrawn plot is a new file (atomic write)
    second = write_report(run).read_text()
    assert [p.stat().st_ino for p in sorted((run / ".report").iterdir())] == inodes  # reused, not redrawn
    strip = lambda page: re.sub(r"Written by .*? on [^.]*\.", "", page)  # noqa: E731
    assert strip(first) == strip(second)
    old = run / ".report" / "latency_cdf-0123.svg"  # a plot of earlier data: pruned by the next report
    old.write_text("<svg/>")
    os.utime(old, (1, 1))
    write_report(run)
    assert not old.exists() and sorted((run / ".report").iterdir()) == cache
    for p in cache:
        p.unlink()
    assert strip(write_report(run).read_text()) == strip(first)  # drawn again: the same bytes


def test_history_adds_trends_oldest_first(tmp_path):
    nights = tmp_path / "nightly"
    for i, day in enumerate(("2026-11-21", "2026-11-22", "2026-11-23")):
        make_run(nights / day, medians={1: 4.0 + 0.1 * i}, seed=i, finished=day + "T02:00:00+0000")
    run = make_run(tmp_path / "today", finished="2026-11-24T02:00:00+0000")
    assert [r["when"][:10] for r in expand_history([nights])] == ["2026-11-21", "2026-11-22", "2026-11-23"]
    page = write_report(run, history=[nights]).read_text()
    assert "<h2>Trends over 4 runs</h2>" in page and page.count("<svg") == 5


def test_partial_run_shows_what_it_has(tmp_path):
    run = tmp_path / "runs" / "checked"
    (run / "check").mkdir(parents=True)
    (run / "check" / "manifest.json").write_text(json.dumps({"status": "ok", "duration_s": 0.1, "results": {"summary": "s"}}))
    (run / "check" / "check.json").write_text(json.dumps({"deployable": False, "verdict": "NO", "routes": []}))
    page = write_report(run).read_text()
    assert "<h2>Check: will it convert?</h2>" in page and "Latency" not in page and "<svg" not in page
    assert "done" in page  # no run.json: the manifests' word


def test_text_from_the_run_is_escaped(tmp_path):
    run = make_run(tmp_path / "tx2", message="<script>alert(1)</script> & <b>")
    record = json.loads((run / "run.json").read_text())
    for s in record["stages"]:
        if s["name"] == "engine":
            s["status"], s["results"] = "pending", {}
    (run / "run.json").write_text(json.dumps(record))
    page = write_report(run).read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;" in page


def test_markdown_summary(tmp_path):
    text = markdown_report(make_run(tmp_path / "tx2", medians={1: 4.0}))
    assert text.startswith("## deploy: tx2")
    assert "| stage | status | result |" in text and "| engine | ran |" in text
    assert re.search(r"\| 1 \| 4\.\d+ \|", text)
    assert "| ONNX → engine | fp16 | 0.004 | 99.0% |" in text
    assert "**batch consistency** pass" in text


def test_a_desktop_gpu_run_says_so_on_the_page_and_in_the_summary(tmp_path):
    run = make_run(tmp_path / "workstation")
    bench = json.loads((run / "benchmark" / "benchmark.json").read_text())
    bench["where"]["hardware"] = "desktop GPU (NVIDIA GeForce RTX 4090), not a Jetson"
    bench["where"].setdefault("fingerprint", {})["gpu"] = "NVIDIA GeForce RTX 4090"
    (run / "benchmark" / "benchmark.json").write_text(json.dumps(bench))
    page = write_report(run).read_text()
    assert "desktop GPU (NVIDIA GeForce RTX 4090), not a Jetson" in page
    assert "measured on: desktop GPU (NVIDIA GeForce RTX 4090), not a Jetson" in markdown_report(run)


def test_markdown_summary_copies_no_markup_from_the_run_folder(tmp_path):
    run = make_run(tmp_path / "tx2", message="<img src=x onerror=alert(1)>")
    bench = json.loads((run / "benchmark" / "benchmark.json").read_text())
    bench["where"]["note"] = "<script>alert(1)</script>"
    bench["where"]["warnings"] = ["clocks <b>not</b> locked & hot"]
    (run / "benchmark" / "benchmark.json").write_text(json.dumps(bench))
    text = markdown_report(run)
    assert "<script>" not in text and "<img" not in text and "<b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "clocks &lt;b&gt;not&lt;/b&gt; locked &amp; hot" in text


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(DeployError, match="no such run folder"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DeployError, match="not a deploy run folder"):
        load_run(tmp_path / "empty")
    run = make_run(tmp_path / "tx2")
    (run / "benchmark" / "benchmark.json").write_text("{not json")
    with pytest.raises(DeployError, match=r"benchmark\.json: cannot read benchmark"):
        load_run(run)
    with pytest.raises(DeployError, match="holds no deploy run folder"):
        expand_history([tmp_path / "empty"])


def test_cli_report_html_markdown_and_errors(tmp_path):
    run = make_run(tmp_path / "tx2")
    (tmp_path / "a-file").write_text("")
    res = deploy("report", run, "-o", tmp_path / "a-file" / "r.html")
    assert res.returncode == 1 and "cannot write the report" in res.stderr and "Traceback" not in res.stderr
    res = deploy("report", run, "-o", tmp_path / "new" / "folder" / "r.html")
    assert res.returncode == 0 and (tmp_path / "new" / "folder" / "r.html").exists()
    res = deploy("report", run)
    assert res.returncode == 0 and res.stdout.strip() == str(run / "report.html")
    res = deploy("report", run, "--format", "markdown")
    assert res.returncode == 0 and res.stdout.startswith("## deploy: tx2")
    res = deploy("report", tmp_path / "nope")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "no such run folder" in res.stderr
