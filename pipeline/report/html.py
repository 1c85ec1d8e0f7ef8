"""The run report as one self-contained HTML file: inline CSS and SVG, no script, no network.

A Content-Security-Policy of ``default-src 'none'`` (inline styles allowed) makes the browser
refuse any request the page might make, so the file is the same on a laptop, in a CI artifact and
in an air-gapped lab. Sections appear when the run has their data.
"""

import html
import time

from pipeline.report.collect import accuracy_of, results_by_batch
from pipeline.report.plots import cached_svg

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
"""
STATUS_CLASS = {"ran": "ok", "cached": "muted", "done": "ok", "pending": "warn", "skipped": "muted", "failed": "bad",
                "not run": "bad"}


def esc(value):
    return html.escape("" if value is None else str(value))


def fmt(value, digits=3):
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "{:.{}g}".format(value, digits)
    return str(value)


def badge(text, cls):
    return '<span class="badge {}">{}</span>'.format(cls, esc(text))


def table(header, rows, numeric=()):
    head = "".join("<th>{}</th>".format(esc(h)) for h in header)
    body = "".join("<tr>{}</tr>".format("".join(
        '<td class="num">{}</td>'.format(c) if i in numeric else "<td>{}</td>".format(c) for i, c in enumerate(row)))
        for row in rows)
    return "<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>".format(head, body)


def plot(cache, kind, data):
    return '<div class="plot">{}</div>'.format(cached_svg(cache, kind, data))


def render_html(run, history=(), cache=None, generated_by="deploy"):
    """The report of ``run`` (pipeline.report.collect.load_run), with trends over ``history`` runs."""
    parts = [_header(run)]
    for section in (_stages, _device, _check, _rewrite, _accuracy, _benchmark, _consistency, _training):
        text = section(run, cache)
        if text:
            parts.append(text)
    if history:
        parts.append(_trends(list(history) + [run], cache))
    parts.append('<p class="note">Written by {} on {}. Self-contained: no scripts, no network; opens from disk.</p>'.format(
        esc(generated_by), esc(time.strftime("%Y-%m-%d %H:%M:%S %Z"))))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<title>deploy report: {title}</title><style>{css}</style></head>\n<body><main>\n{body}\n</main></body></html>\n"
            ).format(csp=CSP, title=esc(run["name"]), css=CSS, body="\n".join(parts))


def _header(run):
    record = run.get("record") or {}
    code = record.get("exit_code")
    verdict = ("" if code is None else badge("exit code {}".format(code), "ok" if code == 0 else "bad"))
    check = run.get("check") or {}
    if check:
        verdict += " " + badge("check: {}".format(check.get("verdict", "?")), "ok" if check.get("deployable") else "bad")
    facts = [("config", record.get("config")), ("target", record.get("target") or (check.get("target") or {}).get("name")),
             ("started", record.get("started")), ("finished", record.get("finished")), ("folder", run["dir"])]
    sub = " · ".join("{} <code>{}</code>".format(k, esc(v)) for k, v in facts if v)
    return "<h1>deploy report: {} {}</h1><p class=\"sub\">{}</p>".format(esc(run["name"]), verdict, sub)


def _stages(run, cache):
    rows = []
    for s in run["stages"]:
        status = s.get("status") or "?"
        rows.append([esc(s["name"]), badge(status, STATUS_CLASS.get(status, "muted")),
                     "–" if s.get("seconds") is None else "{:.1f} s".format(s["seconds"]), esc((s.get("made") or "")[:16].replace("T", " ")),
                     esc(s.get("summary") or s.get("message") or "")])
    if not rows:
        return ""
    return "<h2>Stages</h2>" + table(["stage", "status", "time to make", "made", "result"], rows, numeric=(2,)) + (
        '<p class="note">status is what the last deploy run did (cached: reused); time is how long the result took '
        "to make when it was made.</p>")


def _device(run, cache):
    where = (run.get("benchmark") or {}).get("where") or {}
    if not where:
        return ""
    fp = where.get("fingerprint") or {}
    rows = [[esc(k), esc(fmt(v))] for k, v in (
        ("measured on", where.get("device") or (where.get("host") or {}).get("node") or "this machine"),
        ("hardware", where.get("hardware")), ("GPU", fp.get("gpu")),
        ("runtime", "{} {}".format(where.get("runtime", ""), where.get("version", "")).strip()),
        ("provider", where.get("provider")), ("on the target device", where.get("on_target_device")),
        ("target", where.get("target")), ("board", fp.get("board") or fp.get("model")), ("L4T / JetPack",
         " / ".join(str(v) for v in (fp.get("l4t"), fp.get("jetpack")) if v) or None),
        ("TensorRT", fp.get("tensorrt")), ("CUDA", fp.get("cuda")), ("cuDNN", fp.get("cudnn")), ("Python", fp.get("python")),
        ("power mode", (fp.get("power_mode") or {}).get("mode_name") if isinstance(fp.get("power_mode"), dict) else fp.get("power_mode")),
        ("clocks locked", fp.get("clocks_locked")), ("host", fp.get("hostname"))) if v is not None and v != ""]
    notes = [where["note"]] if where.get("note") else []
    warnings = "".join("<li>{}</li>".format(badge("warning", "warn") + " " + esc(w)) for w in where.get("warnings") or [])
    return ("<h2>Device</h2>" + table(["", ""], rows) + "".join('<p class="note">{}</p>'.format(esc(n)) for n in notes)
            + ('<ul class="findings">{}</ul>'.format(warnings) if warnings else ""))


def _check(run, cache):
    check = run.get("check")
    if not check:
        return ""
    rec = check.get("recommended") or {}
    out = ["<h2>Check: will it convert?</h2>", "<p>{} {} · recommended route <b>{}</b> ({})</p>".format(
        badge(check.get("verdict", "?"), "ok" if check.get("deployable") else "bad"),
        esc((check.get("target") or {}).get("name")), esc(rec.get("route")), esc(rec.get("detail")))]
    rows = []
    for route in check.get("routes") or []:
        findings = route.get("findings") or []
        items = "".join("<li><b>{}</b>: {} <i>fix:</i> {} <span class=\"note\">({} node{})</span></li>".format(
            esc(f.get("kind")), esc(f.get("cause")), esc(f.get("fix")), len(f.get("nodes") or []),
            "" if len(f.get("nodes") or []) == 1 else "s") for f in findings[:8])
        more = '<li class="note">… {} more</li>'.format(len(findings) - 8) if len(findings) > 8 else ""
        rows.append([esc(route.get("route")), esc(route.get("detail")), fmt(route.get("blockers")),
                     fmt(len(route.get("accepted_but_wrong") or [])),
                     '<ul class="findings">{}{}</ul>'.format(items, more) if items else "none"])
    out.append(table(["route", "parser / runtime", "blockers", "accepted but wrong", "findings"], rows, numeric=(2, 3)))
    return "".join(out)


def _rewrite(run, cache):
    receipt = run.get("rewrite")
    if not receipt:
        return ""
    rows = []
    for p in receipt.get("passes") or []:
        comp = p.get("comparison") or {}
        ops = ", ".join("{} {:+d}".format(k, v) for k, v in sorted((p.get("ops") or {}).items()))
        rows.append([esc(p.get("pass")), esc(ops), fmt(len(p.get("sites") or [])),
                     "–" if not comp else "{} {}".format(fmt(comp.get("max_abs_diff")), badge(
                         "pass" if comp.get("passed") else "fail", "ok" if comp.get("passed") else "bad")),
                     fmt(p.get("changes_behaviour"))])
    nodes = receipt.get("nodes") or {}
    before, after = receipt.get("check_before") or {}, receipt.get("check_after") or {}
    return ("<h2>Rewrite receipt</h2><p>{} → {} nodes · before: {} · after: {}</p>".format(
        fmt(nodes.get("before")), fmt(nodes.get("after")), esc(before.get("recommended")), esc(after.get("recommended")))
        + table(["pass", "ops changed", "sites", "max diff vs before", "changes behaviour"], rows, numeric=(2,)))


def _accuracy(run, cache):
    comparison = run.get("comparison") or {}
    acc = (run.get("benchmark") or {}).get("accuracy") or {}
    if not comparison and not acc:
        return ""
    rows = []
    if comparison:
        rows.append(["TensorFlow → ONNX ({})".format(esc((comparison.get("runtimes") or {}).get("candidate", {}).get("runtime", "onnx"))),
                     "fp32", fmt(comparison.get("max_abs_diff")), "–", fmt(comparison.get("tolerance")),
                     esc("{} samples, {}".format(comparison.get("samples"), comparison.get("inputs")))])
    if acc:
        tol = acc.get("tolerance") or {}
        top1 = acc.get("top1_agreement")
        rows.append(["ONNX Runtime → TensorRT engine", esc(tol.get("precision")), fmt(acc.get("max_abs_diff")),
                     "–" if top1 is None else "{:.1%}".format(top1), esc("atol {} rtol {}".format(tol.get("atol"), tol.get("rtol"))),
                     esc("{} images, {}".format(acc.get("images"), acc.get("source")))])
    return "<h2>Accuracy against the reference</h2>" + table(
        ["comparison", "precision", "max abs diff", "top-1 agreement", "tolerance", "inputs"], rows, numeric=(2, 3))


def _benchmark(run, cache):
    bench = run.get("benchmark")
    if not bench:
        return ""
    results = sorted(results_by_batch(run).items())
    cols = ("mean_ms", "std_ms", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms")
    rows = [[fmt(bs)] + [fmt(r.get(c)) for c in cols] + [fmt(r.get("throughput_ips"), 4), fmt(r.get("iterations"))]
            for bs, r in results]
    out = ["<h2>Latency and throughput</h2>", '<p class="note">{}</p>'.format(esc((bench.get("where") or {}).get("note", ""))),
           table(["batch", "mean", "std", "min", "p50", "p90", "p95", "p99", "max", "img/s", "calls"], rows,
                 numeric=tuple(range(11))), '<p class="note">milliseconds per call (a call runs one batch)</p>']
    series = [{"batch_size": bs, "percentiles_ms": r.get("percentiles_ms"), "p50_ms": r.get("p50_ms"),
               "p99_ms": r.get("p99_ms")} for bs, r in results]
    points = [{"batch_size": bs, "throughput_ips": r.get("throughput_ips")} for bs, r in results]
    out.append('<div class="plots">{}{}</div>'.format(plot(cache, "latency_cdf", series), plot(cache, "throughput", points)))
    phases = [(bs, r["phases_mean_ms"]) for bs, r in results if r.get("phases_mean_ms")]
    if phases:
        names = sorted({k for _, p in phases for k in p})
        out.append("<h3>Where the time goes (mean ms per call)</h3>" + table(
            ["batch"] + names, [[fmt(bs)] + [fmt(p.get(n)) for n in names] for bs, p in phases], numeric=tuple(range(len(names) + 1))))
    power = [(bs, r["power"]) for bs, r in results if r.get("power")]
    if power:
        out.append("<h3>Power and energy</h3>" + table(
            ["batch", "module power (mW)", "source", "energy per image (mJ)", "samples"],
            [[fmt(bs), fmt(p.get("board_mw")), esc(p.get("board_power_source")), fmt(p.get("energy_per_image_mj")),
              fmt(p.get("samples"))] for bs, p in power], numeric=(0, 1, 3, 4)))
        rails = power[-1][1].get("rails_mw") or {}
        if rails:
            out.append(plot(cache, "power", {k: rails[k] for k in sorted(rails)}))
    return "".join(out)


def _consistency(run, cache):
    cons = (run.get("benchmark") or {}).get("consistency")
    if not cons:
        return ""
    rows = [[esc(o.get("name")), fmt(o.get("max_abs_diff")), fmt(o.get("passed", o.get("within_tolerance")))]
            for o in cons.get("outputs") or []]
    first = cons.get("first_divergence")
    return ("<h2>Batch consistency</h2><p>{} each of {} images alone vs inside batches of {} ({})</p>".format(
        badge("pass" if cons.get("passed") else "FAIL", "ok" if cons.get("passed") else "bad"),
        esc((cons.get("images") or {}).get("count", "")), esc(", ".join(str(b) for b in cons.get("batch_sizes") or [])),
        esc((cons.get("images") or {}).get("source", "")))
        + (table(["output", "max abs diff", "within tolerance"], rows, numeric=(1,)) if rows else "")
        + ("<p>first layer that diverges: <code>{}</code> {}</p>".format(esc(first), esc(cons.get("first_divergence_note") or ""))
           if first else ""))


def _training(run, cache):
    history = run.get("history") or {}
    epochs = history.get("epochs") or []
    if not epochs:
        return ""
    last = epochs[-1]
    out = ["<h2>Training</h2><p>{} epochs · last: {}</p>".format(len(epochs), esc(", ".join(
        "{} {}".format(k, fmt(v)) for k, v in sorted(last.items()) if isinstance(v, (int, float)))))]
    out.append(plot(cache, "training", [{k: e.get(k) for k in ("loss", "accuracy", "val_loss", "val_accuracy")} for e in epochs]))
    restore = history.get("restore")
    if restore:
        out.append("<p>restored from a checkpoint: {}</p>".format(esc(", ".join("{} {}".format(k, len(v))
                   for k, v in sorted(restore.items()) if isinstance(v, list)))))
    return "".join(out)


def trend_data(runs):
    """The trend plot's data: p50, p99 and throughput per batch size, and accuracy, run by run."""
    labels = [(r.get("when") or r["name"])[:16].replace("T", " ") for r in runs]
    sizes = sorted({bs for r in runs for bs in results_by_batch(r)})
    series = {}
    for title, key in (("p50 latency (ms)", "p50_ms"), ("p99 latency (ms)", "p99_ms"), ("throughput (img/s)", "throughput_ips")):
        series[title] = {"batch {}".format(bs): [results_by_batch(r).get(bs, {}).get(key) for r in runs] for bs in sizes}
    accuracy = [accuracy_of(r) for r in runs]
    series["accuracy"] = {label: [a.get(key) for a in accuracy] for label, key in (
        ("engine top-1 agreement", "engine_top1_agreement"), ("validation accuracy", "val_accuracy"))}
    return {"labels": labels, "series": series}


def _trends(runs, cache):
    data = trend_data(runs)
    return "<h2>Trends over {} runs</h2>{}<p class=\"note\">oldest to newest; the last is this run.</p>".format(
        len(runs), plot(cache, "trend", data))
