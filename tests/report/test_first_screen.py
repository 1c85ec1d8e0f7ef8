"""The report answers first (issue 28, item 4): a local run opens with will it run on the target (route,
verdict, converted or predicted), what failed or is pending with the next command, accuracy against
TensorFlow and latency labelled with where it ran; gating only where a comparison exists; a comparison older
than the run's benchmark is stale, never the verdict; a red job says so before the figures' verdict; a
failed run never shows "check: YES" beside the failure; an LSTM's FLOPs are not its Dense layer's."""

import json
import re

import pytest

from pipeline.report import markdown_report, write_report

from reportkit import edit_json, gate_row, make_run, write_comparison

PENDING = ("TensorRT 8.2.1 builds on the jetson_tx2 (JetPack 4.6.6): add a device: section (transport: local on the "
           "board, ssh from here)")
CONVERT_FAILED = ("tf2onnx cannot convert TensorListReserve at opset 13 (nodes: lstm/TensorArrayV2_1); deploy check "
                  "names the cause and fix")


def _stage(run, name, status, message=""):
    def change(data):
        for entry in data["stages"]:
            if entry["name"] == name:
                entry.update(status=status, message=message, results=None if status != "ran" else entry["results"])
    edit_json(run / "run.json", change)


def local_run(folder):
    """A first local run: host CPU figures (ONNX Runtime), the engine pending for want of a device."""
    run = make_run(folder, device=False)
    _stage(run, "engine", "pending", PENDING)
    (run / "engine" / "manifest.json").unlink()
    return run


def failed_run(folder):
    """The newcomer's LSTM: check said YES (predicted), convert failed, nothing after it ran."""
    run = make_run(folder, device=False, exit_code=2)
    _stage(run, "convert", "failed", CONVERT_FAILED)
    for name in ("engine", "benchmark"):
        _stage(run, name, "not run", "an earlier stage failed")
    edit_json(run / "check" / "check.json", lambda d: d["routes"][1].update(basis="predicted"))  # onnx: tf2onnx not run
    for rel in ("convert/comparison.json", "benchmark/benchmark.json", "benchmark/manifest.json", "engine/manifest.json",
                "convert/manifest.json"):
        (run / rel).unlink()
    (run / "freeze").mkdir(exist_ok=True)
    (run / "freeze" / "frozen.pb").write_bytes(b"")  # what convert read (no rewrite stage in this run)
    return run


def text_of(page):
    """The page's words as a reader sees them (the body, no markup)."""
    body = page[page.index("<body>"):] if "<body>" in page else page
    inline = re.sub(r"</?(b|i|code|span)\b[^>]*>", "", body)  # words inside a line stay joined
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", inline)).replace("&#x27;", "'").strip()


def answers_of(page):
    start = page.index(">", page.index('<section id="answers"')) + 1
    return text_of(page[start:page.index("</section>", start)])


def test_a_local_run_opens_with_the_answers_in_order(tmp_path):
    run = local_run(tmp_path / "jetson_tx2")
    page = write_report(run).read_text()
    assert 'id="verdict"' not in page and "NOT GATED" not in page and "gate" not in text_of(page).lower()
    assert page.index('id="answers"') < page.index("<h2>Stages</h2>")
    words = answers_of(page)
    order = ["YES", "runs on jetson_tx2", "route onnx", "basis: converted: tf2onnx made the ONNX model (TensorRT's parser: "
             "from its op table until an engine is built)",
             "pending", "engine: " + PENDING,
             "next: deploy run configs/jetson_tx2.yaml --set device.transport=ssh --set device.host=BOARD",
             "accuracy vs TensorFlow", "max abs diff 1.1e-06 against TensorFlow (tolerance 0.0001; 8 samples): within tolerance",
             "latency", "p50", "ms at batch 1", "ONNX Runtime 1.32.0 on this host's CPU", "not Jetson figures"]
    at = [words.find(w) for w in order]
    assert -1 not in at and at == sorted(at), list(zip(order, at))
    # the check's verdict is the answers block's, not a header pill beside it
    assert "check: YES" not in page


def test_the_markdown_summary_answers_in_the_same_order(tmp_path):
    text = markdown_report(local_run(tmp_path / "jetson_tx2"))
    lines = text.splitlines()
    assert lines[2].startswith("**runs on jetson_tx2: YES** on the onnx route")
    assert "- **pending** engine: " + PENDING in text and "--set device.host=BOARD`" in text
    assert text.index("**pending**") < text.index("**accuracy vs TensorFlow**") < text.index("**latency**")
    assert "gate" not in text


def test_a_failed_run_says_no_and_what_failed_never_check_yes(tmp_path):
    run = failed_run(tmp_path / "nc_lstm")
    page = write_report(run).read_text()
    words = answers_of(page)
    assert words.startswith("NO does not run on jetson_tx2")
    assert "basis: the conversion failed" in words
    assert "note deploy check said YES (predicted): the conversion is what counts" in words
    assert words.count(CONVERT_FAILED) == 1 and "failed convert: " + CONVERT_FAILED in words
    assert "next: deploy check {}/freeze/frozen.pb --target jetson_tx2".format(run) in words
    (run / "rewrite").mkdir(exist_ok=True)
    (run / "rewrite" / "frozen.pb").write_bytes(b"")  # convert read the rewrite stage's graph when it ran
    assert "next: deploy check {}/rewrite/frozen.pb --target jetson_tx2".format(run) in answers_of(
        write_report(run).read_text())
    assert "not run engine, benchmark: an earlier stage failed" in words
    assert "not measured (the conversion failed)" in words and "not measured (the benchmark did not run)" in words
    head = page[:page.index('id="answers"')]
    assert "check: YES" not in head and 'badge bad">deploy run exit 2' in head
    assert 'class="a-no"' in page


def _with_comparison(run, when, **current):
    path = write_comparison(run, "pass", [gate_row("p50_ms", 1, 4.0, 4.0, "ok")], reasons=["all figures within the band"])
    edit_json(path, lambda d: d["current"].update(when=when, **current))
    return path


def _rebenchmark(run, started):
    """deploy run again with a new benchmark: its manifest and figures change, run.json's finish moves."""
    edit_json(run / "benchmark" / "manifest.json", lambda d: d.update(started=started))
    edit_json(run / "benchmark" / "benchmark.json", lambda d: d["results"][0].update(p50_ms=d["results"][0]["p50_ms"] * 0.7))
    edit_json(run / "run.json", lambda d: d.update(finished=started))


def test_a_comparison_older_than_the_benchmark_is_stale_not_the_verdict(tmp_path):
    run = make_run(tmp_path / "jetson_tx2", finished="2026-11-27T22:56:27+0000")
    _with_comparison(run, "2026-11-27T22:56:27+0000")
    assert ">PASS<" in write_report(run).read_text()  # current: the verdict
    _rebenchmark(run, "2026-11-27T23:16:14+0000")
    page = write_report(run).read_text()
    assert ">PASS<" not in page and "STALE COMPARISON" in page and '<table class="gate">' not in page
    words = text_of(page)
    assert ("it judged the run that finished 2026-11-27T22:56:27+0000; this run's benchmark was made "
            "2026-11-27T23:16:14+0000, after it") in words
    assert "deploy compare BASELINE {} -o {}/comparison.json".format(run, run) in words
    assert page.index('id="answers"') < page.index('class="v-stale"')
    assert "**gate: stale comparison**" in markdown_report(run) and "**gate: PASS" not in markdown_report(run)


def test_a_rerun_that_reuses_the_benchmark_keeps_its_comparison(tmp_path):
    run = make_run(tmp_path / "jetson_tx2", finished="2026-11-27T22:56:27+0000")
    _with_comparison(run, "2026-11-27T22:56:27+0000")
    edit_json(run / "run.json", lambda d: d.update(finished="2026-11-28T09:00:00+0000"))  # all cached
    page = write_report(run).read_text()
    assert ">PASS<" in page and "STALE" not in page


def test_a_comparison_names_its_benchmark_by_digest(tmp_path):
    import hashlib

    run = make_run(tmp_path / "jetson_tx2")
    digest = hashlib.sha256((run / "benchmark" / "benchmark.json").read_bytes()).hexdigest()
    _with_comparison(run, None, benchmark_sha256=digest)
    assert ">PASS<" in write_report(run).read_text()
    edit_json(run / "benchmark" / "benchmark.json", lambda d: d["results"][0].update(p50_ms=1.0))
    page = write_report(run).read_text()
    assert "STALE COMPARISON" in page and "it judged another benchmark (sha256 {}…".format(digest[:12]) in page


GITHUB_STEPS = {  # ${{ toJSON(steps) }} on a night whose on-board tests failed
    "probe": {"outputs": {}, "outcome": "success", "conclusion": "success"},
    "night": {"outputs": {}, "outcome": "success", "conclusion": "success"},
    "onboard": {"outputs": {}, "outcome": "failure", "conclusion": "failure"},
    "compare": {"outputs": {"code": "0"}, "outcome": "success", "conclusion": "success"},
}


def test_a_red_job_says_so_before_the_figures_pass(tmp_path, cli):
    run = make_run(tmp_path / "night")
    write_comparison(run, "pass", [gate_row("p50_ms", 1, 4.0, 4.0, "ok")])
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps(GITHUB_STEPS))
    done = cli("report", str(run), "--steps", str(steps))
    assert done.returncode == 0, done.stderr
    page = (run / "report.html").read_text()
    assert page.index('id="job"') < page.index('id="verdict"') < page.index('id="answers"')
    words = text_of(page)
    assert "JOB FAILED onboard: failure" in words
    assert "steps: probe success · night success · onboard failure · compare success" in words
    assert "the figures' verdict alone: the job failed (onboard: failure)" in words
    assert 'class="v-pass"' not in page  # a pass on a red job is not drawn green
    done = cli("report", str(run), "--steps", str(steps), "--format", "markdown")
    assert done.returncode == 0 and done.stdout.splitlines()[2] == "**job: FAILED** — onboard: failure"


def test_a_green_job_says_every_step_succeeded_and_the_verdict_stays(tmp_path):
    run = make_run(tmp_path / "night")
    write_comparison(run, "pass", [gate_row("p50_ms", 1, 4.0, 4.0, "ok")])
    page = write_report(run, steps=[("probe", "success"), ("compare", "success")]).read_text()
    assert "job: every step succeeded" in text_of(page) and 'class="v-pass"' in page and "JOB FAILED" not in page


def test_the_failed_marker_is_a_red_job_too(tmp_path):
    run = make_run(tmp_path / "night", failed="on-board tests: failure")
    page = write_report(run).read_text()
    assert "JOB FAILED on-board tests: failure" in text_of(page)


@pytest.mark.parametrize("content, says", [
    ("[1, 2]", "expected a JSON object of step: outcome, got list"),
    ('{"probe": "green"}', "step 'probe' has outcome 'green'; expected one of success, failure, cancelled, skipped"),
    ("{not json", "not JSON"),
])
def test_a_bad_steps_file_is_one_line(tmp_path, content, says, cli):
    run = make_run(tmp_path / "night")
    steps = tmp_path / "steps.json"
    steps.write_text(content)
    done = cli("report", str(run), "--steps", str(steps))
    err = done.stderr
    assert done.returncode == 1 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (run / "report.html").exists()


def _check_share(run, share, findings=()):
    def change(data):
        data["routes"].append({"route": "tftrt", "detail": "TF-TRT", "blockers": 0, "accepted_but_wrong": [],
                               "findings": list(findings), "share": share})
    edit_json(run / "check" / "check.json", change)


LOOP = "StatefulPartitionedCall/functional_1/lstm_1/while"


def test_an_lstm_whose_length_is_fixed_at_run_time_has_unknown_flops(tmp_path):
    run = make_run(tmp_path / "lstm")
    _check_share(run, {"nodes": 1.0, "compute": 1.0, "flops": None, "segments": 1, "estimated": False,
                       "loops": [{"loop": LOOP, "trip_count": None, "flops_per_iteration": 49152, "nodes": 2}]})
    words = text_of(write_report(run).read_text())
    assert ("FLOPs unknown (a loop runs a number of times fixed only at run time ({}: 49,152 FLOPs per iteration of "
            "its body))".format(LOOP)) in words and "256 FLOPs" not in words


def test_a_fixed_length_lstm_counts_its_body_per_step(tmp_path):
    run = make_run(tmp_path / "lstm")
    _check_share(run, {"nodes": 1.0, "compute": 1.0, "flops": 2320, "segments": 1, "estimated": False,
                       "loops": [{"loop": LOOP, "trip_count": 6, "flops_per_iteration": 384, "nodes": 2}]})
    words = text_of(write_report(run).read_text())
    assert "FLOPs 2.32 kFLOPs" in words and "loop bodies counted once per iteration ({} × 6)".format(LOOP) in words


def test_a_check_from_before_loops_were_counted_is_not_believed(tmp_path):
    run = make_run(tmp_path / "lstm")
    enter = {"kind": "unsupported_op", "op": "Enter", "cause": "control flow", "fix": "unroll", "nodes": ["w/enter"]}
    _check_share(run, {"nodes": 1.0, "compute": 1.0, "flops": 256, "segments": 1, "estimated": False}, [enter])
    words = text_of(write_report(run).read_text())
    assert "256 FLOPs" not in words and "FLOPs unknown (the check that estimated them counted loop bodies once" in words


def test_tonight_kept_in_the_history_before_the_report_is_not_drawn_twice(tmp_path):
    """The workflow renders the report after "Keep tonight" copied the night into the history."""
    import shutil

    history = tmp_path / "history"
    make_run(history / "night-1", seed=1, finished="2026-11-23T02:00:00+0000")
    run = make_run(tmp_path / "night", finished="2026-11-24T02:00:00+0000")
    shutil.copytree(run, history / "night-2")
    page = write_report(run, history=[history]).read_text()
    assert "Trends over 2 runs" in page


def test_a_route_the_check_predicted_reads_converted_once_the_convert_stage_made_it(tmp_path):
    run = local_run(tmp_path / "jetson_tx2")
    edit_json(run / "check" / "check.json", lambda d: d["recommended"].update(
        detail="opset 13, TensorRT 8.2.1 ONNX parser (tf2onnx prediction)"))
    words = answers_of(write_report(run).read_text())
    assert "route onnx (opset 13, TensorRT 8.2.1 ONNX parser) · basis: converted" in words and "prediction" not in words


def test_a_no_the_check_reached_on_tf2onnx_output_says_so(tmp_path):
    """The real LSTM with tf2onnx installed: deploy check converted it and said NO; a later stage failed."""
    run = make_run(tmp_path / "nc_lstm", deployable=False, exit_code=1)
    edit_json(run / "check" / "check.json", lambda d: (d["routes"][1].update(basis="converted"),
                                                       d["recommended"].update(blockers=2)) and None)
    _stage(run, "rewrite", "failed", "the numeric checks feed images to a model with one NHWC image input")
    for name in ("convert", "engine", "benchmark"):
        _stage(run, name, "not run", "an earlier stage failed")
    (run / "convert" / "comparison.json").unlink()
    words = answers_of(write_report(run).read_text())
    assert words.startswith("NO does not run on jetson_tx2")
    assert "basis: converted: deploy check ran tf2onnx on the graph" in words
    assert "note 2 blockers on the onnx route" in words and "next: deploy run configs/jetson_tx2.yaml" in words
    assert "not measured (the convert stage did not run)" in words


def test_the_next_command_repeats_the_run_s_own_overrides(tmp_path):
    """A run started as `deploy run C --set model.zoo=null --set model.source=m.pb`: its report's next command said
    `deploy run C` alone, which trains the config's zoo model instead of the user's."""
    run = local_run(tmp_path / "jetson_tx2")
    edit_json(run / "run.json", lambda d: d.update(overrides=["model.zoo=null", "model.source=my model.pb"]))
    text = markdown_report(run)
    assert "--set model.zoo=null --set 'model.source=my model.pb' --set device.transport=ssh --set device.host=BOARD" \
        in text, text
