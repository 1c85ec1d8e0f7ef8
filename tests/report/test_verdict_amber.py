"""The gate's amber verdicts (issue 28 items 1 and 3): ``deploy compare`` says "suspect" for a figure out of
band on one night and "throttled" for a night whose clocks moved; both exit 0. The report and the markdown
job summary show them as themselves, in amber: never "not a verdict deploy knows" (read as no data), never a
green PASS, never a red REGRESSION."""

import re
import shutil
import subprocess

import pytest

from pipeline.report import markdown_report, write_report
from pipeline.report import verdict as gatelib

from reportkit import gate_row, make_run, write_comparison

SUSPECT_REASON = "1 suspect figure (out of band tonight; a regression only if it persists): p50 b1 +10.0%"
THROTTLED_REASON = ("throttled: batch 1: the GPU clock moved from 1300 to 854 MHz during the timed loop (not judged; "
                    "the night is kept, out of the reference)")
# the lead applies H9's patch to html_parts.py / html.py / markdown.py (files H9 does not own); until then these
# assertions fail, and strict xfail turns into a failure the day they pass: then take the marker out


def amber_night(folder, verdict):
    """A night whose comparison.json says ``verdict`` as deploy compare writes it (contract A)."""
    run = make_run(folder, medians={1: 4.4, 8: 20.0})
    if verdict == "suspect":
        rows = [gate_row("p50_ms", 8, 20.0, 20.1, "ok", note="within the band"),
                gate_row("p50_ms", 1, 4.0, 4.4, "suspect", note="beyond the band tonight, not on the night before")]
        write_comparison(run, "suspect", rows, reasons=[SUSPECT_REASON])
    else:
        write_comparison(run, "throttled", [], reasons=[THROTTLED_REASON])
    return run


def css_rule(page, selector):
    """The declarations of the first CSS rule of the page whose selector list holds ``selector``."""
    css = page[page.index("<style>") + 7:page.index("</style>")]
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        if selector in [s.strip() for s in selectors.split(",")]:
            return dict(d.split(":", 1) for d in body.split(";") if ":" in d)
    return None


@pytest.mark.parametrize("verdict", ["suspect", "throttled"])
def test_the_gate_reader_knows_both_amber_verdicts(verdict):
    gate = gatelib.normalize({"verdict": verdict, "reasons": ["why"], "rows": []})
    assert gate["verdict"] == verdict
    assert not any("not a verdict deploy knows" in r for r in gate["reasons"])
    assert gatelib.headline(gate) == "why"


def test_suspect_figures_sort_after_regressions_before_the_rest():
    rows = [{"status": s} for s in ("ok", "noise", "suspect", "not compared", "regression", "improved")]
    assert [r["status"] for r in gatelib.sorted_rows(rows)] == [
        "regression", "suspect", "not compared", "noise", "improved", "ok"]


@pytest.mark.parametrize("verdict, word, reason", [("suspect", "SUSPECT", SUSPECT_REASON),
                                                   ("throttled", "THROTTLED", THROTTLED_REASON)])
def test_the_page_says_the_amber_verdict_never_pass_nor_regression(tmp_path, verdict, word, reason):
    page = write_report(amber_night(tmp_path / "night", verdict)).read_text()
    assert 'class="v-{}"'.format(verdict) in page and '<span class="word">{}</span>'.format(word) in page
    assert reason.replace("'", "&#x27;") in page
    body = page[page.index("</style>"):]
    for wrong in (">PASS<", ">REGRESSION<", "NO DATA", "not a verdict deploy knows", 'class="v-pass"',
                  'class="v-regression"'):
        assert wrong not in body, wrong


@pytest.mark.parametrize("verdict", ["suspect", "throttled"])
def test_the_summary_names_the_verdict_never_pass_nor_regression(tmp_path, verdict):
    summary = markdown_report(amber_night(tmp_path / "night", verdict))
    gate_line = next(line for line in summary.splitlines() if line.startswith("**gate:"))
    assert "({})".format(verdict) in gate_line
    for wrong in ("PASS", "REGRESSION", "NO DATA", "no data"):
        assert wrong not in gate_line, wrong
    assert "not a verdict deploy knows" not in summary


@pytest.mark.parametrize("verdict", ["suspect", "throttled"])
def test_the_verdict_panel_is_amber(tmp_path, verdict):
    page = write_report(amber_night(tmp_path / "night", verdict)).read_text()
    amber = css_rule(page, ".warn")["background"]
    panel, ok, bad = (css_rule(page, "#verdict.v-" + v) for v in (verdict, "pass", "regression"))
    assert panel is not None and panel["background"] == amber
    assert panel["background"] not in (ok["background"], bad["background"])
    assert css_rule(page, ".v-{} .word".format(verdict))["color"] == css_rule(page, ".warn")["color"]


def test_a_suspect_figure_is_an_amber_row_and_listed_in_the_summary(tmp_path):
    run = amber_night(tmp_path / "night", "suspect")
    page = write_report(run).read_text()
    assert '<span class="badge warn">suspect</span>' in page
    summary = markdown_report(run)
    assert "**gate: SUSPECT** (suspect)" in summary
    assert re.search(r"\| p50 latency \| 1 \|.*\| suspect \| beyond the band tonight", summary)


def test_the_summary_says_throttled_in_capitals(tmp_path):
    assert "**gate: THROTTLED** (throttled)" in markdown_report(amber_night(tmp_path / "night", "throttled"))


CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
AMBER, GREEN, RED = (0xFF, 0xF1, 0xD6), (0xE6, 0xF5, 0xE9), (0xFD, 0xE8, 0xE8)  # the panel backgrounds of html.py's CSS


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
@pytest.mark.parametrize("verdict", ["suspect", "throttled"])
def test_headless_chromium_draws_the_panel_amber(tmp_path, verdict):
    import numpy as np
    from PIL import Image

    page = write_report(amber_night(tmp_path / "night", verdict))
    png = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--screenshot={}".format(png), "--window-size=1400,1000", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    image = np.asarray(Image.open(png).convert("RGB")).astype(int)

    def share(colour):
        return float(np.mean(np.all(np.abs(image - np.array(colour)) <= 2, axis=-1)))

    assert share(AMBER) > 0.005 and share(GREEN) < 0.0005 and share(RED) < 0.0005
