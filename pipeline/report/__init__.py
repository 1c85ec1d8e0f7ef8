"""``deploy report``: a run folder as one self-contained HTML page (or Markdown for a CI summary).

    load_run(run_dir)            -> plain data (collect)
    render_html(run, history)    -> the page (html; plots from plots, cached under <run>/.report/)
    render_markdown(run)         -> the job summary (markdown)
    write_report(run_dir, ...)   -> writes <run>/report.html atomically and returns its path

Both open with what the run is opened for: the job's outcome when it went red (``steps=``, the job's step
outcomes: pipeline.report.job), the gate's verdict where a current comparison exists (``comparison.json``
from ``deploy compare ... -o`` in the run folder, beside it naming the run, or ``comparison=``; one older
than the run's benchmark is marked stale, pipeline.report.verdict), then will it run on the target, what is
pending and the next command, accuracy against TensorFlow and latency (pipeline.report.answers).
"""

from pathlib import Path

from pipeline import files
from pipeline.report.collect import expand_history, load_run
from pipeline.report.plots import CACHE

REPORT = "report.html"


def write_report(run_dir, history=(), output=None, comparison=None, steps=None):
    """Write the HTML report of ``run_dir`` (to ``output`` or ``<run_dir>/report.html``); its path.
    ``comparison``: the gate's comparison.json (default: the run folder's, see verdict.find_gate).
    ``steps``: the job's step outcomes, [(step, outcome)] (pipeline.report.job.read_steps)."""
    from pipeline import __version__
    from pipeline.report.html import render_html

    import time

    from pipeline.report.plots import prune
    from pipeline.report.verdict import gate_for

    started = time.time() - 1  # file times may be coarser than time.time()
    run_dir = Path(run_dir)
    files.refuse_link(run_dir / CACHE)  # the plot cache is written and pruned: never through a link
    run = load_run(run_dir)
    past = expand_history(history)
    gate = gate_for(run, run_dir, comparison)
    page = render_html(run, [r for r in past if not _same_night(r, run)],
                       cache=run_dir / CACHE, generated_by="deploy " + __version__, gate=gate, steps=steps)
    out = Path(output) if output else run_dir / REPORT
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(out, page)
    except OSError as e:
        from pipeline.errors import DeployError

        raise DeployError("{}: cannot write the report ({}); pass -o FILE somewhere writable".format(out, e.strerror or e))
    prune(run_dir / CACHE, before=started)
    return out


def _same_night(past, run):
    """``past`` is ``run`` itself: its folder, or the nightly's copy of it in the history (the workflow keeps
    tonight before it renders the report: same run name, same finish)."""
    if Path(past["dir"]).resolve() == Path(run["dir"]).resolve():
        return True
    return bool(run.get("when")) and (past.get("name"), past.get("when")) == (run.get("name"), run.get("when"))


def markdown_report(run_dir, comparison=None, steps=None):
    from pipeline.report.markdown import render_markdown
    from pipeline.report.verdict import gate_for

    run = load_run(run_dir)
    return render_markdown(run, gate=gate_for(run, run_dir, comparison), steps=steps)


__all__ = ["load_run", "expand_history", "write_report", "markdown_report", "REPORT"]
