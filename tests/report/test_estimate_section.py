"""The run report's estimate section (pipeline.estimate.summary.run_estimate): beside the board's measured
p50 where a board measured the run, else the estimate alone for run.json's target; always labelled as an
estimate with its basis; never for the host, never beside host figures, never a failed report."""

import re

from pipeline import records
from pipeline.report.html import render_html
from pipeline.report.markdown import render_markdown
from pipeline.report.collect import load_run
from tests.estimate.test_calibrate import onnx_conv_model

HEADING = "Estimated latency (offline, not a measurement)"


def _run(root, target="jetson_nano", runtime="tensorrt", on_target=True, p50=0.4, graph=True):
    (root / "convert").mkdir(parents=True)
    (root / "benchmark").mkdir()
    if graph:
        onnx_conv_model(root / "convert" / "model.onnx")
    records.write(root / "run.json", {"run": root.name, "target": target, "exit_code": 0}, "run")
    records.write(root / "benchmark" / "benchmark.json", {
        "where": {"runtime": runtime, "target": target, "on_target_device": on_target},
        "results": [{"batch_size": 1, "p50_ms": p50, "mean_ms": p50, "p99_ms": p50 * 1.1},
                    {"batch_size": 4, "p50_ms": p50 * 1.2, "mean_ms": p50 * 1.2, "p99_ms": p50 * 1.3}]}, "benchmark")
    return root


def _section(page):
    start = page.index(HEADING)
    end = page.find("<h2>", start + 1)
    return page[start:end if end > 0 else len(page)]


def _cells(section):
    return [re.sub(r"<[^>]+>", "", row) for row in re.findall(r"<tr>(.*?)</tr>", section)]


def test_on_board_run_shows_measured_p50_beside_the_estimate(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(tmp_path / "mine"))
    run = load_run(_run(tmp_path / "board"))
    section = _section(render_html(run))
    assert "jetson_nano (fp16, MAXN" in section and "measured p50 on the board beside it" in section
    assert "basis: fitted on" in section and "docs/estimate.md" in section
    rows = _cells(section)
    assert len(rows) == 3  # header, batch 1, batch 4
    assert rows[1].startswith("10.4") and rows[2].startswith("40.48")  # batch, then the measured p50
    md = render_markdown(run)
    assert "### " + HEADING in md and "| 1 | 0.4 |" in md and "basis: fitted on" in md


def test_host_run_shows_the_estimate_alone_never_beside_host_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(tmp_path / "mine"))
    run = load_run(_run(tmp_path / "host", runtime="onnxruntime", on_target=False, p50=0.0123))
    section = _section(render_html(run))
    assert "no on-board TensorRT figure in this run: the estimate alone" in section
    rows = _cells(section)
    assert [r[:2] for r in rows[1:]] == ["1–", "4–"]  # no measured figure beside it: the host's 0.0123 ms is not one
    assert "0.0123" not in section and "0.0148" not in section


def test_no_section_for_the_host_target_and_a_note_for_a_graph_it_cannot_estimate(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(tmp_path / "mine"))
    host = load_run(_run(tmp_path / "cpu", target="host_cpu", runtime="onnxruntime", on_target=False))
    assert HEADING not in render_html(host) and HEADING not in render_markdown(host)
    bad = _run(tmp_path / "bad", runtime="onnxruntime", on_target=False, graph=False)
    (bad / "convert" / "model.onnx").write_bytes(b"not an onnx file")
    page = render_html(load_run(bad))  # the report is still made
    assert "no estimate for jetson_nano:" in _section(page)
