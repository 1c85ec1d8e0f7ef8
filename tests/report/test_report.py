"""deploy report: the HTML page and the Markdown summary from run folders; bad input."""

import json
import os
import re

import pytest

from pipeline.errors import DeployError
from pipeline.report import markdown_report, write_report
from pipeline.report.collect import expand_history, load_run

from reportkit import gate_row, make_run, write_comparison


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
    assert "<h2>Trends over 4 runs</h2>" in page and page.count("<svg") == 8  # 4 + p50, p99, throughput, accuracy


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


def test_cli_report_html_markdown_and_errors(tmp_path, cli):
    run = make_run(tmp_path / "tx2")
    (tmp_path / "a-file").write_text("")
    res = cli("report", run, "-o", tmp_path / "a-file" / "r.html")
    assert res.returncode == 1 and "cannot write the report" in res.stderr and "Traceback" not in res.stderr
    res = cli("report", run, "-o", tmp_path / "new" / "folder" / "r.html")
    assert res.returncode == 0 and (tmp_path / "new" / "folder" / "r.html").exists()
    res = cli("report", run)
    assert res.returncode == 0 and res.stdout.strip() == str(run / "report.html")
    res = cli("report", run, "--format", "markdown")
    assert res.returncode == 0 and res.stdout.startswith("## deploy: tx2")
    res = cli("report", tmp_path / "nope")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "no such run folder" in res.stderr



# ---------------------------------------------------------------- issue 19 / review M8: the night's question

def _regressed(tmp_path, nights=12, **kw):
    run = make_run(tmp_path / "night-2026-11-24T0200-deadbee-200.1", medians={1: 4.4, 8: 20.0},
                   finished="2026-11-24T02:00:00+0000", **kw)
    rows = [gate_row("p50_ms", 8, 20.0, 20.1, "ok", note="within 5 %"),
            gate_row("p50_ms", 1, 4.0, 4.4, "regression", note="beyond 5 %, nights' spread ± 2.1 %"),
            gate_row("throughput_ips", 1, 250.0, 227.0, "regression", note="beyond 5 %")]
    write_comparison(run, "regression", rows, reasons=["2 figures beyond the tolerance and the nights' spread"],
                     nights=nights, failed_nights=1)
    return run


def _first(page, text):
    assert text in page, text
    return page.index(text)


def test_the_gate_verdict_comes_first_with_why_per_figure(tmp_path):
    page = write_report(_regressed(tmp_path)).read_text()
    verdict = _first(page, 'id="verdict"')
    assert verdict < _first(page, "<h2>Stages</h2>") and verdict < _first(page, "<h2>Device</h2>")
    assert 'class="v-regression"' in page and ">REGRESSION<" in page
    assert "2 figures worse than the reference: p50 latency at batch 1 +10.0%, throughput at batch 1 -9.2%" in page
    assert "2 figures beyond the tolerance and the nights&#x27; spread" in page
    assert "the median of 12 nights on the baseline&#x27;s fingerprint (1 failed, flagged and kept in the band)" in page
    assert "baseline baseline (2026-11-01)" in page and "jetson_tx2 (JetPack 4.6.6, TensorRT 8.2.1, MAXN)" in page
    table_ = page[page.index('<table class="gate">'):]
    table_ = table_[:table_.index("</table>")]
    # regressions first; reference, band, tonight, interval, change and the why of each figure
    assert table_.index("row-regression") < table_.index("row-ok")
    assert "[3.84, 4.16]" in table_ and "[4.356, 4.444]" in table_ and "+10.0%" in table_ and "beyond 5 %" in table_
    # the run's exit code is not dressed as the night's verdict (the review's green "exit code 0")
    assert "exit code 0" not in page and 'badge ok">deploy run exit' not in page


@pytest.mark.parametrize("verdict, word, css", [("pass", "PASS", "v-pass"), ("not comparable", "NOT COMPARABLE", "v-not-comparable"),
                                                ("no data", "NO DATA", "v-no-data")])
def test_each_verdict_has_its_word_and_reason(tmp_path, verdict, word, css):
    run = make_run(tmp_path / "tx2")
    rows = [gate_row("p50_ms", 1, 4.0, 4.0, "ok")] if verdict == "pass" else []
    reason = {"pass": "all figures within the band", "not comparable": "power mode MAXN vs MAXQ (not expected)",
              "no data": "the current run has no benchmark (the benchmark stage failed)"}[verdict]
    write_comparison(run, verdict, rows, reasons=[reason])
    page = write_report(run).read_text()
    assert 'class="{}"'.format(css) in page and ">{}<".format(word) in page
    assert html_text(reason) in page
    if verdict == "pass":
        assert "no figure worse than the reference (1 compared)" in page


def html_text(s):
    import html as _html

    return _html.escape(s)


def test_a_run_not_compared_shows_no_gate_and_never_looks_passed(tmp_path):
    page = write_report(make_run(tmp_path / "tx2")).read_text()
    assert 'id="verdict"' not in page and "NOT GATED" not in page  # gating appears only where a comparison exists
    assert ">PASS<" not in page and 'id="answers"' in page


def test_comparison_json_is_read_defensively():
    from pipeline.report.verdict import normalize

    legacy = normalize({"passed": False, "regressions": 1, "notes": ["baseline: clocks not locked"],
                        "rows": [{"metric": "p50 b1 (ms)", "baseline": 4.0, "current": 4.4, "change": 0.1,
                                  "verdict": "regression", "why": "beyond 5%"},
                                 {"metric": "throughput b8 (img/s)", "baseline": 400, "current": None, "verdict": "missing"}]})
    assert legacy["verdict"] == "regression" and legacy["reasons"] == ["baseline: clocks not locked"]
    assert [(r["figure"], r["batch_size"], r["status"]) for r in legacy["rows"]] == [
        ("p50_ms", 1, "regression"), ("throughput_ips", 8, "not compared")]
    # "not compared" is never a pass: a pass that compared nothing is "no data"
    empty = normalize({"verdict": "pass", "rows": [{"figure": "p50_ms", "batch_size": 1, "status": "not compared"}]})
    assert empty["verdict"] == "no data" and "no figure was compared" in empty["reasons"][0]
    odd = normalize({"verdict": "green", "rows": "nonsense", "reference": [1], "hardware": None})
    assert odd["verdict"] == "no data" and odd["rows"] == [] and odd["reference"] == {} and "'green'" in odd["reasons"][0]
    assert normalize({})["verdict"] == "no data"


def test_an_unreadable_comparison_is_no_data_not_a_pass(tmp_path):
    run = make_run(tmp_path / "tx2")
    bad = tmp_path / "comparison.json"
    bad.write_text("{truncated")
    page = write_report(run, comparison=bad).read_text()
    assert ">NO DATA<" in page and "comparison.json: cannot read the gate&#x27;s verdict" in page and ">PASS<" not in page


def test_a_comparison_beside_the_run_counts_only_when_it_names_the_run(tmp_path):
    from pipeline.report.verdict import find_gate

    run = make_run(tmp_path / "runs" / "jetson_tx2")
    other = tmp_path / "runs" / "comparison.json"
    other.write_text(json.dumps({"verdict": "pass", "current": {"dir": "runs/xavier_nx", "name": "xavier_nx"}}))
    assert find_gate(run) is None
    other.write_text(json.dumps({"verdict": "regression", "current": {"dir": str(run), "name": "jetson_tx2"}}))
    assert find_gate(run) == other
    assert ">REGRESSION<" in write_report(run).read_text()
    explicit = write_comparison(tmp_path / "elsewhere", "pass", [gate_row("p50_ms", 1, 4.0, 4.0, "ok")])
    assert ">PASS<" in write_report(run, comparison=explicit).read_text()


def test_commit_config_digest_and_fingerprint_are_on_the_page(tmp_path):
    run = make_run(tmp_path / "runs" / "tx2")
    page = write_report(run).read_text()
    assert "commit <b>unknown</b>" in page  # run.json records none and the folder name has none
    assert "fingerprint board <b>jetson_tx2</b>" in page
    for part in ("L4T <b>32.7.6</b>", "JetPack <b>4.6.6</b>", "TensorRT <b>8.2.1</b>", "CUDA <b>10.2</b>",
                 "power mode <b>MAXN</b>", "clocks <b>locked</b>"):
        assert part in page, part
    record = json.loads((run / "run.json").read_text())
    record.update(commit="0123456789abcdef0123456789abcdef01234567", commit_source="GITHUB_SHA",
                  config_digest="feedc0de" * 8, ci={"runner": "lab-x86-1"})
    (run / "run.json").write_text(json.dumps(record))
    page = write_report(run).read_text()
    assert "<code>0123456789ab</code></b> <span class=\"note\">(GITHUB_SHA)" in page
    assert "<code>feedc0defeed</code></b> <span class=\"note\">(run.json)" in page and "lab-x86-1" in page
    # a night folder of the workflow carries the commit in its name; stage manifests give a digest
    night = make_run(tmp_path / "night-2026-11-24T0200-deadbee-200.1")
    manifest = json.loads((night / "convert" / "manifest.json").read_text())
    manifest["config_digest"] = "ab" * 32
    (night / "convert" / "manifest.json").write_text(json.dumps(manifest))
    page = write_report(night).read_text()
    assert "<code>deadbee</code></b> <span class=\"note\">(the night folder&#x27;s name)" in page
    assert "(the stages&#x27; options (convert))" in page


def test_a_noisy_run_says_so_and_a_quiet_one_does_not(tmp_path):
    quiet = make_run(tmp_path / "quiet", spread=0.03, n=500)
    assert 'badge warn">noisy' not in write_report(quiet).read_text()
    noisy = make_run(tmp_path / "noisy", spread=0.03, n=500)
    bench = json.loads((noisy / "benchmark" / "benchmark.json").read_text())
    first = bench["results"][0]
    first["p99_ms"], first["mean_ms"] = first["p50_ms"] * 3.1, first["p50_ms"] * 1.6
    (noisy / "benchmark" / "benchmark.json").write_text(json.dumps(bench))
    page = write_report(noisy).read_text()
    note = "batch 1: noisy run: p99 is 3.1× the p50"
    assert page.count(note) == 2  # on the first screen and in the latency section
    assert page.index(note) < page.index("<h2>Stages</h2>") and "two modes" in page
    assert "batch 8: noisy" not in page
    assert "noisy run: p99 is 3.1× the p50" in markdown_report(noisy)


def test_the_p50_interval_from_the_gate_marks_a_wide_run_noisy(tmp_path):
    run = make_run(tmp_path / "tx2", spread=0.03, n=500)
    write_comparison(run, "pass", [gate_row("p50_ms", 1, 4.0, 4.0, "ok", interval=0.08)])
    assert "batch 1: noisy run: the p50&#x27;s 95 % interval" in write_report(run).read_text()


def test_p99_of_few_calls_shows_its_open_interval_and_power_in_whole_milliwatts(tmp_path):
    run = make_run(tmp_path / "tx2", n=100)
    page = write_report(run).read_text()
    assert "p99 95 % interval" in page and "(open: 100 calls)" in page
    assert "e+03" not in page and ">5200<" in page
    many = write_report(make_run(tmp_path / "many", n=5000)).read_text()
    assert "(open:" not in many and re.search(r"<td class=\"num\">\[\d[\d.]*, \d[\d.]*\]</td>", many)


def test_a_host_only_run_names_the_cpu_and_says_not_jetson(tmp_path):
    run = make_run(tmp_path / "tx2", device=False)
    bench = json.loads((run / "benchmark" / "benchmark.json").read_text())
    bench["where"]["host"] = {"node": "vm", "machine": "x86_64", "system": "Linux", "cpu": "AMD EPYC 7763 64-Core Processor",
                              "cpu_count": 4}
    (run / "benchmark" / "benchmark.json").write_text(json.dumps(bench))
    page = write_report(run).read_text()
    device = page[page.index("<h2>Device</h2>"):page.index("<h2>Check")]
    assert "AMD EPYC 7763 64-Core Processor (4 cores, x86_64, Linux)" in device
    assert "these are not Jetson figures" in device and 'id="host-only"' in device
    assert "fingerprint host CPU <b>AMD EPYC" in page and "board <b>jetson_tx2" not in page
    text = markdown_report(run)
    assert "> host CPU figures (AMD EPYC 7763 64-Core Processor (4 cores, x86_64, Linux)), not Jetson figures" in text
    # a board run says nothing of the kind
    assert "host-only" not in write_report(make_run(tmp_path / "board")).read_text()


def _tiny_onnx(path, shapes):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.zeros(s, np.float32), "w{}".format(i)) for i, s in enumerate(shapes)]
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], initializer=inits)
    onnx.save(helper.make_model(graph), str(path))
    return path.stat().st_size


def test_the_model_section_has_size_parameters_flops_and_engine_settings_while_pending(tmp_path):
    run = make_run(tmp_path / "tx2")
    size = _tiny_onnx(run / "convert" / "model.onnx", [(3, 3, 3, 16), (16,)])  # 432 + 16 parameters
    manifest = json.loads((run / "convert" / "manifest.json").read_text())
    manifest["outputs"] = {"onnx": {"path": "model.onnx", "size": size}}
    (run / "convert" / "manifest.json").write_text(json.dumps(manifest))
    check = json.loads((run / "check" / "check.json").read_text())
    check["routes"].append({"route": "tftrt", "detail": "TF-TRT", "blockers": 0, "findings": [], "accepted_but_wrong": [],
                            "share": {"nodes": 0.9, "compute": 0.99, "flops": 123456789, "segments": 1, "estimated": True}})
    (run / "check" / "check.json").write_text(json.dumps(check))
    record = json.loads((run / "run.json").read_text())
    for s in record["stages"]:
        if s["name"] in ("engine", "benchmark"):
            s["status"], s["results"] = "pending", {}
    record["settings"] = {"engine": {"precision": "int8", "max_batch_size": 16, "workspace_mb": 2048, "builder": "trtexec",
                                     "dla_core": None}, "benchmark": {"batch_sizes": [1, 4]}}
    (run / "run.json").write_text(json.dumps(record))
    (run / "engine" / "manifest.json").unlink()
    (run / "benchmark" / "manifest.json").unlink()
    page = write_report(run).read_text()
    model = page[page.index("<h2>Model</h2>"):page.index("<h2>Device</h2>")]
    assert "<code>model.onnx</code> {:,} bytes".format(size) in model
    assert ">448 <" in model and "elements of the 2 initializers of model.onnx" in model
    assert "123 MFLOPs" in model and "some sizes guessed" in model
    assert "engine pending" in model and ">int8<" in model and "batch min 1 · opt 4 · max 16" in model
    assert "2048 MB" in model and "trtexec" in model and "from run.json" in model and "not built yet" in model
    assert list((run / ".report").glob("params-*.json"))  # the count is kept: the next report does not parse the model


def test_engine_settings_fall_back_to_the_config_file_and_a_built_engine_profile(tmp_path):
    from pipeline.report.model_facts import engine_settings

    run = make_run(tmp_path / "tx2")
    config = tmp_path / "c.yaml"
    config.write_text("run:\n  name: tx2\ntarget: jetson_tx2\nmodel:\n  zoo: mobilenet_v2\nstages:\n  engine:\n"
                      "    precision: fp32\n    max_batch_size: 4\n  benchmark:\n    batch_sizes: [1, 2]\n")
    record = json.loads((run / "run.json").read_text())
    record["config"] = str(config)
    for s in record["stages"]:
        if s["name"] == "engine":
            s["status"] = "pending"
    (run / "run.json").write_text(json.dumps(record))
    got = engine_settings(load_run(run))
    assert (got["precision"], got["profile"], got["state"]) == ("fp32", "batch min 1 · opt 2 · max 4", "pending")
    assert "as it reads now" in got["source"]
    (run / "engine" / "engine.json").write_text(json.dumps({"profile": {"input": {"min": [1, 96, 96, 3], "opt": [8, 96, 96, 3],
                                                                                  "max": [8, 96, 96, 3]}}}))
    assert engine_settings(load_run(run))["profile"] == "input: min [1, 96, 96, 3] · opt [8, 96, 96, 3] · max [8, 96, 96, 3]"


def test_trends_have_one_axes_per_batch_size_with_the_gate_band_and_failed_nights(tmp_path):
    from pipeline.report.html import trend_data

    nights = tmp_path / "nightly"
    for i in range(6):
        day = "2026-11-{:02d}".format(10 + i)
        night = make_run(nights / "night-{}T0200-{:07x}-{}.1".format(day, 0xabc1230 + i, i), medians={1: 4.0, 8: 20.0},
                         seed=i, finished=day + "T02:00:00+0000")
        if i == 2:
            (night / "FAILED").write_text("")
    run = _regressed(tmp_path, nights=6)
    figures = trend_data(expand_history([nights]) + [load_run(run)], gate=load_gate_of(run))
    p50 = figures[0]
    assert p50["title"] == "p50 latency" and [p["name"] for p in p50["panels"]] == ["batch 1", "batch 8"]
    b1, b8 = p50["panels"]
    assert all(v < 6 for v in b1["values"]) and all(v > 15 for v in b8["values"])  # own axes: never mixed
    assert b1["reference"] == 4.0 and b1["band"] == [3.84, 4.16] and b1["status"] == "regression"
    assert b8["status"] == "ok" and "median of 6 nights" in b1["reference_label"]
    assert p50["failed"] == [False, False, True, False, False, False, False]
    assert p50["labels"][0] == "11-10 abc1230" and p50["labels"][-1] == "11-24 deadbee"
    assert [f["title"] for f in figures] == ["p50 latency", "p99 latency", "throughput", "accuracy"]
    page = write_report(run, history=[nights]).read_text()
    trends = page[page.index("<h2>Trends"):page.index("<h2>Stages</h2>")]  # right after the verdict
    assert trends.count("<svg") == 4 and "1 failed night (grey crosses)" in trends
    assert len(re.findall(r'<g id="axes_\d+"', trends.split("</svg>")[0])) >= 2  # p50: an axes per batch size
    assert "fill: #2ca02c" in trends and "stroke-dasharray" in trends  # the band and the reference line


def load_gate_of(run):
    from pipeline.report.verdict import find_gate, load_gate

    return load_gate(find_gate(run))


def test_without_a_gate_trends_draw_the_earlier_nights_median(tmp_path):
    from pipeline.report.html import trend_data

    runs = [load_run(make_run(tmp_path / str(i), medians={1: 4.0 + i}, seed=i, finished="2026-11-2{}T02:00:00+0000".format(i)))
            for i in range(4)]
    panel = trend_data(runs)[0]["panels"][0]
    assert panel["reference"] == pytest.approx(5.0, rel=0.01) and panel["band"] is None and panel["reference_label"] == "median of earlier nights"


def test_markdown_summary_leads_with_the_verdict_and_the_fingerprint(tmp_path):
    run = _regressed(tmp_path)
    text = markdown_report(run)
    lines = text.splitlines()
    assert lines[2].startswith("**gate: REGRESSION** (regression) — 2 figures worse than the reference")
    assert "| p50 latency | 1 | 4 | 4.4 | +10.0% | regression | beyond 5 %, nights' spread ± 2.1 % |" in text
    assert "| p50 latency | 8 |" not in text  # only what failed or was not compared
    assert ("**board** jetson_tx2 · **L4T** 32.7.6 · **JetPack** 4.6.6 · **TensorRT** 8.2.1 · **CUDA** 10.2 · "
            "**power mode** MAXN · **clocks** locked · **commit** deadbee") in text
    plain = markdown_report(make_run(tmp_path / "plain"))
    assert plain.splitlines()[2].startswith("**runs on jetson_tx2: YES**") and "gate" not in plain
