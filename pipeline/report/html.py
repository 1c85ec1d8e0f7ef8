"""The run report as one self-contained HTML file: inline CSS and SVG, no script, no network.

A Content-Security-Policy of ``default-src 'none'`` (inline styles allowed) makes the browser
refuse any request the page might make, so the file is the same on a laptop, in a CI artifact and
in an air-gapped lab. Sections appear when the run has their data.
"""

import time

from pipeline.report import first_screen
from pipeline.report import model_facts as modelinfo
from pipeline.report import machine
from pipeline.report import provenance as runinfo
from pipeline.report import verdict as gatelib
from pipeline.report.collect import accuracy_of, results_by_batch
from pipeline.report.job import job_outcome
from pipeline.report.html_parts import ROW_CLASS, VERDICT_WORD, badge, esc, fmt, plot, table  # noqa: F401 - VERDICT_WORD
from pipeline.report.html_sections import SECTIONS


CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:20px 28px 40px;background:#fff}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e3e3e3;padding-bottom:4px}
.sub{color:#666;margin:0 0 12px}table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border-bottom:1px solid #e8e8e8;padding:4px 10px 4px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:9px;font-size:12px;font-weight:600}
.ok{background:#e3f4e6;color:#17622a}.bad{background:#fbe3e3;color:#9b1c1c}.warn{background:#fff1d6;color:#7a4b00}
.muted{background:#eceff3;color:#555}.plots{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
.plot svg{max-width:100%;height:auto}.note{color:#666;font-size:12px}code{font-size:12px;background:#f2f3f5;padding:0 3px}
ul.findings{margin:4px 0 8px 18px;padding:0}ul.findings li{margin:2px 0}
.facts{color:#444;margin:0 0 10px;font-size:13px}.facts b{color:#222;font-weight:600}
#verdict{border-radius:6px;padding:10px 16px 8px;margin:8px 0 10px;border-left:8px solid}
#verdict .word{font-size:24px;font-weight:800;letter-spacing:.02em;margin-right:10px}
#verdict .board{font-size:14px;color:#333}#verdict p{margin:4px 0}#verdict ul{margin:4px 0 4px 18px;padding:0}
#verdict.v-pass{background:#e6f5e9;border-left-color:#2a9a47}.v-pass .word{color:#17622a}
#verdict.v-regression{background:#fde8e8;border-left-color:#c62828}.v-regression .word{color:#9b1c1c}
#verdict.v-not-comparable,#verdict.v-no-data,#verdict.v-suspect,#verdict.v-throttled{background:#fff1d6;border-left-color:#d08a00}
.v-not-comparable .word,.v-no-data .word,.v-suspect .word,.v-throttled .word{color:#7a4b00}
#verdict.v-none{background:#eef0f3;border-left-color:#8a929c}.v-none .word{color:#444}
table.gate td:nth-child(4),table.gate td:nth-child(6),table.gate td.num{white-space:nowrap}
table.gate tr.row-regression td{background:#fdf0f0}table.gate tr.row-not-compared td,table.gate tr.row-suspect td{background:#fff8e8}.noisy{color:#7a4b00}
""" + first_screen.CSS


def render_html(run, history=(), cache=None, generated_by="deploy", gate=None, steps=None):
    """The report of ``run`` (pipeline.report.collect.load_run), with trends over ``history`` runs.

    First the job's outcome when it went red (``steps``: pipeline.report.job.read_steps of the job's step
    outcomes, and the run's FAILED marker), then, where a current comparison exists (``gate``:
    pipeline.report.verdict.gate_for), the gate's verdict, then the answers a run is opened for (will it
    run on the target, what is pending and the next command, accuracy, latency). Gating appears only
    where a comparison exists; one older than the run's benchmark is marked stale, never the verdict."""
    job = job_outcome(run, steps)
    parts = [_header(run, gate), first_screen.job_block(job)]
    stale = gate is not None and gate.get("stale")
    if gate is not None and not stale:
        parts.append(_verdict(run, gate, job))
    parts.append(first_screen.answers_block(run))
    if stale:
        parts.append(first_screen.stale_block(run, gate))
        gate = None  # its band and reference are not about this benchmark
    if history:
        parts.append(_trends(list(history) + [run], cache, gate))
    for section in SECTIONS:
        text = section(run, cache)
        if text:
            parts.append(text)
    parts.append('<p class="note">Written by {} on {}. Self-contained: no scripts, no network; opens from disk.</p>'.format(
        esc(generated_by), esc(time.strftime("%Y-%m-%d %H:%M:%S %Z"))))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<title>deploy report: {title}</title><style>{css}</style></head>\n<body><main>\n{body}\n</main></body></html>\n"
            ).format(csp=CSP, title=esc(run["name"]), css=CSS, body="\n".join(parts))


def _header(run, gate=None):
    """The title, where the run came from (commit, config digest, fingerprint), and nothing that reads as the
    night's verdict: the run's exit code says whether the stages ran, not whether the figures are good."""
    record = run.get("record") or {}
    code = record.get("exit_code")
    badges = ("" if code is None else badge("deploy run exit {}".format(code), "muted" if code == 0 else "bad"))
    check = run.get("check") or {}  # its verdict is the answers block's, beside what failed (first_screen)
    facts = [("config", record.get("config")), ("target", record.get("target") or (check.get("target") or {}).get("name")),
             ("finished", record.get("finished")), ("folder", run["dir"])]
    sub = " · ".join("{} <code>{}</code>".format(k, esc(v)) for k, v in facts if v)
    prov = runinfo.provenance(run)
    commit = ('commit <b><code>{}</code></b> <span class="note">({})</span>'.format(esc(prov["commit"][:12]), esc(prov["commit_source"]))
              if prov["commit"] else 'commit <b>unknown</b> <span class="note">(run.json records none)</span>')
    digest = ('config digest <b><code>{}</code></b> <span class="note">({})</span>'.format(
        esc(prov["config_digest"][:12]), esc(prov["digest_source"])) if prov["config_digest"] else "config digest <b>unknown</b>")
    fp = machine.fingerprint_items(run, gate)
    finger = "fingerprint " + (" · ".join("{} <b>{}</b>".format(esc(k), esc(v)) for k, v in fp) if fp else "<b>unknown</b> (no benchmark)")
    ci = prov.get("ci") or {}
    extra = " · runner <code>{}</code>".format(esc(ci["runner"])) if ci.get("runner") else ""
    return ('<h1>deploy report: {} {}</h1><p class="sub">{}</p><p class="facts" id="provenance">{} · {}{}<br>{}</p>'
            .format(esc(run["name"]), badges, sub, commit, digest, extra, finger))


def _verdict(run, gate, job=None):
    """The gate's verdict, why, and each figure against the reference (a current comparison only). On a red
    job it says it is the figures' verdict alone, and a pass is not drawn green."""
    notes = runinfo.noise_notes(run, gate)
    noisy = ('<ul class="findings noisy" id="noise">{}</ul>'.format(
        "".join("<li>{} {}</li>".format(badge("noisy", "warn"), esc(n)) for n in notes)) if notes else "")
    v = gate["verdict"]
    red_job = bool(job and job["failed"])
    reasons = gatelib.other_reasons(gate)
    out = ['<section id="verdict" class="v-{}"><span class="word">{}</span><span class="board">{}</span>'.format(
        "none" if red_job and v == "pass" else v.replace(" ", "-"), VERDICT_WORD.get(v, v.upper()), esc(_board(run, gate))),
        '<p class="why"><b>{}</b></p>'.format(esc(gatelib.headline(gate)))]
    if red_job:
        out.append("<p><b>the figures' verdict alone: the job failed ({})</b></p>".format(esc("; ".join(job["failures"]))))
    if reasons:
        out.append("<ul>{}</ul>".format("".join("<li>{}</li>".format(esc(r)) for r in reasons)))
    if gate.get("notes"):
        out.append('<ul class="note">{}</ul>'.format("".join("<li>{}</li>".format(esc(n)) for n in gate["notes"])))
    ref = gatelib.reference_sentence(gate)
    if ref:
        out.append('<p class="note">compared with {}</p>'.format(esc(ref)))
    out.append("</section>")
    rows = []
    for r in gatelib.sorted_rows(gate["rows"]):
        unit = gatelib.figure_unit(r["figure"])
        rows.append(('<tr class="row-{}">'.format(esc(r["status"].replace(" ", "-"))), [
            esc(gatelib.figure_label(r)) + (" <span class=\"note\">{}</span>".format(esc(unit)) if unit else ""),
            fmt(r["batch_size"]), _val(r["reference"] if r["reference"] is not None else r["raw_baseline"]),
            _iv(r["band"]), _val(r["current"] if r["current"] is not None else r["raw_current"]), _iv(r["interval"]),
            esc(gatelib.change_text(r)), badge(r["status"], ROW_CLASS.get(r["status"], "muted")), esc(r["note"])]))
    if rows:
        head = "".join("<th>{}</th>".format(h) for h in ("figure", "batch", "reference", "band", "tonight", "95 % interval",
                                                          "change", "verdict", "why"))
        body = "".join(tr + "".join('<td class="num">{}</td>'.format(c) if i in (1, 2, 4, 6) else "<td>{}</td>".format(c)
                                    for i, c in enumerate(cells)) + "</tr>" for tr, cells in rows)
        out.append('<table class="gate"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>'.format(head, body))
    out.append(noisy)
    return "".join(out)


def _board(run, gate):
    hw = (gate or {}).get("hardware") or {}
    if hw.get("label"):
        return str(hw["label"])
    where = (run.get("benchmark") or {}).get("where") or {}
    fp = where.get("fingerprint") or {}
    if machine.is_host_only(run):
        return "host CPU{}, not a Jetson".format(": " + machine.host_cpu(where) if machine.host_cpu(where) else "")
    return str(fp.get("board") or where.get("hardware") or where.get("device") or where.get("target")
               or (run.get("record") or {}).get("target") or "")


def _val(v):
    if isinstance(v, bool):
        return "pass" if v else "FAIL"
    return fmt(v, 4) if isinstance(v, float) else esc(fmt(v))


def _iv(pair):
    if not pair:
        return "–"
    return "[{}, {}]".format(*("–" if v is None else "{:.4g}".format(v) for v in pair))


TREND_FIGURES = (("p50_ms", "p50 latency", "ms"), ("p99_ms", "p99 latency", "ms"), ("throughput_ips", "throughput", "img/s"))


def trend_label(run):
    """A night on the trend's x axis: its date and commit."""
    when = (run.get("when") or "")[5:10]
    commit = runinfo.provenance(run)["commit"]
    return "{} {}".format(when, commit[:7]).strip() if commit else ((run.get("when") or run["name"])[:16].replace("T", " "))


def trend_data(runs, gate=None):
    """One plot's data per figure (p50, p99, throughput, accuracy): a panel per batch size, the nights' values,
    and the gate's reference and band for tonight's figure (else the earlier nights' median, no band)."""
    labels = [trend_label(r) for r in runs]
    failed = [modelinfo.failed_night(r) for r in runs]
    sizes = sorted({bs for r in runs for bs in results_by_batch(r)})
    rows = {(r["figure"], r["batch_size"]): r for r in (gate or {}).get("rows") or []}
    nights = ((gate or {}).get("reference") or {}).get("nights")
    figures = []
    for key, title, unit in TREND_FIGURES:
        panels = []
        for bs in sizes:
            values = [results_by_batch(r).get(bs, {}).get(key) for r in runs]
            panels.append(_panel("batch {}".format(bs), values, rows.get((key, bs)), nights))
        if any(v is not None for p in panels for v in p["values"]):
            figures.append({"title": title, "unit": unit, "labels": labels, "failed": failed, "panels": panels})
    accuracy = [accuracy_of(r) for r in runs]
    acc_rows = [r for r in (gate or {}).get("rows") or [] if r["figure"] == "accuracy"]
    panels = []
    for label, key, words in (("engine top-1 agreement", "engine_top1_agreement", ("top-1", "agreement", "engine")),
                              ("validation accuracy", "val_accuracy", ("validation", "val_acc"))):
        values = [a.get(key) for a in accuracy]
        if any(v is not None for v in values):
            row = next((r for r in acc_rows if any(w in "{} {}".format(r.get("label") or "", r["note"]).lower()
                                                   for w in words)), None)
            panels.append(_panel(label, values, row, nights))
    if panels:
        figures.append({"title": "accuracy", "unit": "", "labels": labels, "failed": failed, "panels": panels})
    return figures


def _panel(name, values, row, nights):
    if row is not None and (row["reference"] is not None or row["band"]):
        return {"name": name, "values": values, "reference": row["reference"], "band": row["band"], "status": row["status"],
                "reference_label": "reference{}".format(" (median of {} nights)".format(nights) if nights else "")}
    earlier = sorted(v for v in values[:-1] if v is not None)
    median = None
    if earlier:
        mid = len(earlier) // 2
        median = earlier[mid] if len(earlier) % 2 else (earlier[mid - 1] + earlier[mid]) / 2
    return {"name": name, "values": values, "reference": median, "band": None,
            "status": row["status"] if row is not None else None, "reference_label": "median of earlier nights"}


def _trends(runs, cache, gate=None):
    figures = trend_data(runs, gate)
    if not figures:
        return ""
    where = ("the dashed line is the gate's reference and the green band its band (comparison.json)" if gate
             else "the dashed line is the median of the earlier nights (no comparison.json: no band)")
    failed = sum(modelinfo.failed_night(r) for r in runs)
    return ('<h2>Trends over {} runs</h2><p class="note">oldest to newest, labelled by date and commit; the last is this '
            "run. Each batch size has its own axes; {}; the right axis is % of the reference{}.</p>{}").format(
        len(runs), where, "; {} failed night{} (grey crosses), kept in the band".format(failed, "" if failed == 1 else "s")
        if failed else "", "".join(plot(cache, "trend", f) for f in figures))
