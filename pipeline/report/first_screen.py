"""The top of the HTML report, before the sections: the job's outcome when it went red, the answers a run
is opened for (pipeline.report.answers), and a comparison that no longer judges the run's benchmark,
marked stale. The gate's verdict itself, where a current comparison exists, is pipeline.report.html's."""

from pipeline.report import answers as ans
from pipeline.report import provenance as runinfo
from pipeline.report.html_parts import esc, fmt

CSS = """
#answers{border-radius:6px;padding:10px 16px 6px;margin:8px 0 10px;border-left:8px solid;background:#f4f6f8}
#answers .word{font-size:24px;font-weight:800;margin-right:10px}#answers .q{font-size:16px;font-weight:600}
#answers.a-yes{border-left-color:#2a9a47}.a-yes .word{color:#17622a}#answers.a-no{border-left-color:#c62828;background:#fdf0f0}
.a-no .word{color:#9b1c1c}#answers.a-unknown{border-left-color:#8a929c}.a-unknown .word{color:#444}
#answers table{margin:6px 0 4px;font-size:14px}#answers th{width:170px;white-space:nowrap}#answers td code{font-size:13px}
#answers tr.failed th{color:#9b1c1c}#answers tr.pending th{color:#7a4b00}
#job{border-radius:6px;padding:8px 16px;margin:8px 0 10px;border-left:8px solid #c62828;background:#fde8e8}
#job .word{font-size:22px;font-weight:800;color:#9b1c1c;margin-right:10px}#job p{margin:4px 0}
#verdict.v-stale{background:#fff1d6;border-left-color:#d08a00}.v-stale .word{color:#7a4b00}
"""


def job_block(job):
    """The job's outcome: a red block first when a step failed; one quiet line when every step succeeded;
    nothing when the report was given no outcomes and the run carries no FAILED marker."""
    if not job["known"]:
        return ""
    steps = " · ".join("{} <b>{}</b>".format(esc(name), esc(outcome)) for name, outcome in job["steps"])
    if not job["failed"]:
        return '<p class="facts" id="job">job: every step succeeded ({})</p>'.format(steps)
    return ('<section id="job"><span class="word">JOB FAILED</span> <span class="q">{}</span>{}'
            '<p class="note">what follows judges what the run produced; the job is red whatever the figures say</p>'
            "</section>").format(esc("; ".join(job["failures"])), "<p>steps: {}</p>".format(steps) if steps else "")


def answers_block(run):
    """Will it run on the target, what failed or is pending and the next command, accuracy against
    TensorFlow, latency where measured: the first thing on the page of a local run."""
    t = ans.target_answer(run)
    target = esc(t["target"] or "the target")
    if t["answer"] == "YES":
        head = '<span class="word">YES</span> <span class="q">runs on {}</span>'.format(target)
    elif t["answer"] == "NO":
        head = '<span class="word">NO</span> <span class="q">does not run on {}</span>'.format(target)
    else:
        head = '<span class="word">NOT KNOWN</span> <span class="q">whether it runs on {}</span>'.format(target)
    bits = []
    if t["route"]:
        bits.append("route <b>{}</b>{}".format(esc(t["route"]), " ({})".format(esc(t["detail"])) if t["detail"] else ""))
    if t["basis"]:
        bits.append("basis: <b>{}</b>".format(esc(ans.BASIS_WORDS.get(t["basis"], t["basis"]))))
    rows = []
    if t["why"]:
        rows.append(("note" if t["answer"] != "YES" else "engine", esc(t["why"]), ""))
    for item in ans.open_items(run):
        text = "<b>{}</b>: {}".format(esc(item["stage"]), esc(item["why"]))
        if item["next"]:
            text += "<br>next: <code>{}</code>".format(esc(item["next"]))
        rows.append((item["status"], text, item["status"].replace(" ", "-")))
    rows.append(("accuracy vs TensorFlow", _accuracy(run), ""))
    rows.append(("latency", _latency(run), ""))
    table = "".join('<tr class="{}"><th>{}</th><td>{}</td></tr>'.format(cls, esc(k), v) for k, v, cls in rows)
    return ('<section id="answers" class="a-{}"><p>{}</p><p>{}</p><table><tbody>{}</tbody></table></section>').format(
        {"YES": "yes", "NO": "no"}.get(t["answer"], "unknown"), head, " · ".join(bits), table)


_SAID = {"not run": "did not run", "pending": "is pending", "failed": "failed", "skipped": "was skipped"}


def _stage_status(run, name):
    return next((s.get("status") for s in run.get("stages") or [] if s.get("name") == name), None)


def _accuracy(run):
    acc = ans.accuracy_answer(run)
    tf, engine = acc["tensorflow"], acc["engine"]
    out = []
    if tf is not None:
        verdict = {True: "within tolerance", False: "<b>beyond tolerance</b>", None: "no tolerance recorded"}[tf["within"]]
        out.append("{} max abs diff <b>{}</b> against TensorFlow (tolerance {}; {} samples): {}".format(
            esc(tf["runtime"]), esc(fmt(tf["max_abs_diff"])), esc(fmt(tf["tolerance"])), esc(fmt(tf["samples"])), verdict))
    else:
        status = _stage_status(run, "convert")
        out.append("not measured ({})".format(esc("the conversion failed" if status == "failed" else "the convert stage {}".format(
            _SAID.get(status, status)) if status else "no convert stage")))
    if engine is not None:
        top1 = "–" if engine["top1"] is None else "{:.1%}".format(engine["top1"])
        out.append("engine against ONNX Runtime: top-1 agreement <b>{}</b>, max abs diff {} ({}, {} images)".format(
            esc(top1), esc(fmt(engine["max_abs_diff"])), esc(engine["precision"] or "?"), esc(fmt(engine["images"]))))
    return "<br>".join(out)


def _latency(run):
    lat = ans.latency_answer(run)
    if lat is None:
        status = _stage_status(run, "benchmark")
        return "not measured ({})".format(esc("the benchmark {}".format(_SAID.get(status, status)) if status else "no benchmark"))
    figures = " · ".join("p50 <b>{} ms</b> at batch {} ({} img/s)".format(esc(fmt(p50)), esc(bs), esc(fmt(ips, 4)))
                         for bs, p50, ips in lat["rows"])
    noise = "".join('<br><span class="noisy">{}</span>'.format(esc(n)) for n in runinfo.noise_notes(run))
    return '{}<br><span class="{}">{}</span>{}'.format(figures, "noisy" if lat["host_only"] else "note", esc(lat["where"]), noise)


def stale_block(run, gate):
    """A comparison that judged an earlier benchmark: said to be stale, its old verdict in words only (no
    "tonight" column: its figures are not the run's), and the command that judges the run as it is."""
    return ('<section id="verdict" class="v-stale"><span class="word">STALE COMPARISON</span> '
            '<span class="board">not this run\'s verdict</span><p>comparison.json in the run folder is older than '
            "its benchmark: {}. It said {} then.</p><p>Judge the run as it is: <code>deploy compare BASELINE {} -o "
            "{}/comparison.json</code></p></section>").format(
        esc(gate["stale"]), esc(gate["verdict"].upper()), esc(run["dir"]), esc(run["dir"]))
