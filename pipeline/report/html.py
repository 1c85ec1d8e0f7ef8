"""The run report as one self-contained HTML file: inline CSS and SVG, no script, no network.

A Content-Security-Policy of ``default-src 'none'`` (inline styles allowed) makes the browser
refuse any request the page might make, so the file is the same on a laptop, in a CI artifact and
in an air-gapped lab. Sections appear when the run has their data.
"""

import html
import time

from pipeline.report import verdict as gatelib
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
.facts{color:#444;margin:0 0 10px;font-size:13px}.facts b{color:#222;font-weight:600}
#verdict{border-radius:6px;padding:10px 16px 8px;margin:8px 0 10px;border-left:8px solid}
#verdict .word{font-size:24px;font-weight:800;letter-spacing:.02em;margin-right:10px}
#verdict .board{font-size:14px;color:#333}#verdict p{margin:4px 0}#verdict ul{margin:4px 0 4px 18px;padding:0}
#verdict.v-pass{background:#e6f5e9;border-left-color:#2a9a47}.v-pass .word{color:#17622a}
#verdict.v-regression{background:#fde8e8;border-left-color:#c62828}.v-regression .word{color:#9b1c1c}
#verdict.v-not-comparable,#verdict.v-no-data{background:#fff1d6;border-left-color:#d08a00}.v-not-comparable .word,.v-no-data .word{color:#7a4b00}
#verdict.v-none{background:#eef0f3;border-left-color:#8a929c}.v-none .word{color:#444}
table.gate td:nth-child(4),table.gate td:nth-child(6),table.gate td.num{white-space:nowrap}
table.gate tr.row-regression td{background:#fdf0f0}table.gate tr.row-not-compared td{background:#fff8e8}.noisy{color:#7a4b00}
"""
STATUS_CLASS = {"ran": "ok", "cached": "muted", "done": "ok", "pending": "warn", "skipped": "muted", "failed": "bad",
                "not run": "bad"}
ROW_CLASS = {"regression": "bad", "not compared": "warn", "noise": "muted", "improved": "ok", "ok": "ok"}
VERDICT_WORD = {"pass": "PASS", "regression": "REGRESSION", "not comparable": "NOT COMPARABLE", "no data": "NO DATA"}


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


def render_html(run, history=(), cache=None, generated_by="deploy", gate=None):
    """The report of ``run`` (pipeline.report.collect.load_run), with trends over ``history`` runs. ``gate``:
    the gate's verdict (pipeline.report.verdict.load_gate of comparison.json), shown first."""
    parts = [_header(run, gate), _verdict(run, gate)]
    if history:
        parts.append(_trends(list(history) + [run], cache, gate))
    for section in (_stages, _model, _device, _check, _rewrite, _accuracy, _benchmark, _consistency, _training):
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
    check = run.get("check") or {}
    if check:
        badges += " " + badge("check: {}".format(check.get("verdict", "?")), "muted" if check.get("deployable") else "bad")
    facts = [("config", record.get("config")), ("target", record.get("target") or (check.get("target") or {}).get("name")),
             ("finished", record.get("finished")), ("folder", run["dir"])]
    sub = " · ".join("{} <code>{}</code>".format(k, esc(v)) for k, v in facts if v)
    prov = gatelib.provenance(run)
    commit = ('commit <b><code>{}</code></b> <span class="note">({})</span>'.format(esc(prov["commit"][:12]), esc(prov["commit_source"]))
              if prov["commit"] else 'commit <b>unknown</b> <span class="note">(run.json records none)</span>')
    digest = ('config digest <b><code>{}</code></b> <span class="note">({})</span>'.format(
        esc(prov["config_digest"][:12]), esc(prov["digest_source"])) if prov["config_digest"] else "config digest <b>unknown</b>")
    fp = gatelib.fingerprint(run, gate)
    finger = "fingerprint " + (" · ".join("{} <b>{}</b>".format(esc(k), esc(v)) for k, v in fp) if fp else "<b>unknown</b> (no benchmark)")
    ci = prov.get("ci") or {}
    extra = " · runner <code>{}</code>".format(esc(ci["runner"])) if ci.get("runner") else ""
    return ('<h1>deploy report: {} {}</h1><p class="sub">{}</p><p class="facts" id="provenance">{} · {}{}<br>{}</p>'
            .format(esc(run["name"]), badges, sub, commit, digest, extra, finger))


def _verdict(run, gate):
    """The gate's verdict, why, and each figure against the reference: the first thing on the page."""
    notes = gatelib.noise_notes(run, gate)
    noisy = ('<ul class="findings noisy" id="noise">{}</ul>'.format(
        "".join("<li>{} {}</li>".format(badge("noisy", "warn"), esc(n)) for n in notes)) if notes else "")
    if gate is None:
        return ('<section id="verdict" class="v-none"><span class="word">NOT GATED</span>'
                '<span class="board">{}</span><p>deploy compare did not judge this run: there is no comparison.json in '
                "its folder (<code>deploy compare BASELINE {} -o {}/comparison.json</code> writes one).</p></section>{}"
                ).format(esc(_board(run, None)), esc(run["dir"]), esc(run["dir"]), noisy)
    v = gate["verdict"]
    reasons = gatelib.other_reasons(gate)
    out = ['<section id="verdict" class="v-{}"><span class="word">{}</span><span class="board">{}</span>'.format(
        v.replace(" ", "-"), VERDICT_WORD.get(v, v.upper()), esc(_board(run, gate))),
        '<p class="why"><b>{}</b></p>'.format(esc(gatelib.headline(gate)))]
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
    if gatelib.is_host_only(run):
        return "host CPU{}, not a Jetson".format(": " + gatelib.host_cpu(where) if gatelib.host_cpu(where) else "")
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


def _model(run, cache):
    """What the model is: its files' sizes, parameters, FLOPs, and the engine's settings (also while the
    engine is pending: from the config the run used)."""
    facts = gatelib.model_facts(run, cache)
    settings = gatelib.engine_settings(run)
    if not facts["files"] and facts["parameters"] is None and facts["flops"] is None and settings is None:
        return ""
    rows = [[esc(what), "<code>{}</code> {} bytes ({})".format(esc(name), "{:,}".format(size), esc(_bytes(size)))]
            for what, name, size in facts["files"]]
    rows.append(["parameters", ("{:,} <span class=\"note\">({})</span>".format(facts["parameters"], esc(facts["parameters_source"]))
                                if facts["parameters"] is not None else "unknown <span class=\"note\">({})</span>".format(
                                    esc(facts["parameters_source"])))])
    rows.append(["FLOPs", ("{} <span class=\"note\">({})</span>".format(esc(_si(facts["flops"])), esc(facts["flops_note"]))
                           if facts["flops"] else "unknown <span class=\"note\">(deploy check's TF-TRT route estimates them "
                                                  "for TensorFlow graphs; it did not run)</span>")])
    out = ["<h2>Model</h2>", table(["", ""], rows)]
    if settings is not None:
        state = settings["state"]
        srows = [[esc(k), esc(fmt(v))] for k, v in (
            ("precision", settings["precision"]), ("profile", settings["profile"]),
            ("benchmark batch sizes", ", ".join(str(b) for b in settings["batch_sizes"]) or None),
            ("workspace", "{} MB".format(settings["workspace_mb"]) if settings["workspace_mb"] else None),
            ("builder", settings["builder"]), ("DLA core", settings["dla_core"])) if v is not None and v != ""]
        pending = state in ("pending", "not run", "failed", "skipped")
        out.append("<h3>Engine settings{}</h3>".format(" " + badge("engine " + state, STATUS_CLASS.get(state, "muted"))
                                                       if pending else ""))
        out.append(table(["", ""], srows))
        out.append('<p class="note">from {}{}</p>'.format(esc(settings["source"]), "; the engine is not built yet: these "
                                                          "are the settings it will be built with" if pending else ""))
    return "".join(out)


def _bytes(n):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return "{:.1f} {}".format(n / size, unit)
    return "{} B".format(n)


def _si(n):
    for unit, size in (("TFLOPs", 1e12), ("GFLOPs", 1e9), ("MFLOPs", 1e6), ("kFLOPs", 1e3)):
        if n >= size:
            return "{:.3g} {}".format(n / size, unit)
    return "{} FLOPs".format(n)


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
    host = ""
    if gatelib.is_host_only(run):
        cpu = gatelib.host_cpu(where)
        rows.insert(1, ["host CPU", esc(cpu or "not recorded (benchmark.json has no host section)")])
        host = ('<p id="host-only">{} measured on this host\'s CPU{}, not on a Jetson: <b>these are not Jetson figures</b> '
                "(no TensorRT engine ran; a board's latency, throughput and power can differ by orders of magnitude)."
                "</p>").format(badge("host only", "warn"), " ({})".format(esc(cpu)) if cpu else "")
    return ("<h2>Device</h2>" + host + table(["", ""], rows) + "".join('<p class="note">{}</p>'.format(esc(n)) for n in notes)
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
    rows = [[fmt(bs)] + [fmt(r.get(c)) for c in cols] + [_p99_interval(r), fmt(r.get("throughput_ips"), 4),
                                                         fmt(r.get("iterations"))]
            for bs, r in results]
    notes = gatelib.noise_notes(run)
    out = ["<h2>Latency and throughput</h2>", '<p class="note">{}</p>'.format(esc((bench.get("where") or {}).get("note", ""))),
           table(["batch", "mean", "std", "min", "p50", "p90", "p95", "p99", "max", "p99 95 % interval", "img/s", "calls"],
                 rows, numeric=tuple(range(12))),
           '<p class="note">milliseconds per call (a call runs one batch); the p99\'s 95 % interval from the order '
           "statistics of the calls: with few calls its top end runs past the slowest call (open-ended), and the p99 "
           "is then little more than the largest call</p>"]
    if notes:
        out.append('<ul class="findings noisy">{}</ul>'.format("".join("<li>{} {}</li>".format(badge("noisy", "warn"), esc(n))
                                                                        for n in notes)))
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
            [[fmt(bs), _mw(p.get("board_mw")), esc(p.get("board_power_source")), fmt(p.get("energy_per_image_mj")),
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


def _p99_interval(r):
    iv = gatelib.quantile_interval(r, 0.99)
    if iv is None:
        return "–"
    lo, hi = iv
    if hi is None:
        return "≥ {} (open: {} calls)".format(fmt(lo), fmt(r.get("iterations")))
    return "[{}, {}]".format(fmt(lo), fmt(hi))


def _mw(v):
    return "–" if v is None else "{:.0f}".format(v)


TREND_FIGURES = (("p50_ms", "p50 latency", "ms"), ("p99_ms", "p99 latency", "ms"), ("throughput_ips", "throughput", "img/s"))


def trend_label(run):
    """A night on the trend's x axis: its date and commit."""
    when = (run.get("when") or "")[5:10]
    commit = gatelib.provenance(run)["commit"]
    return "{} {}".format(when, commit[:7]).strip() if commit else ((run.get("when") or run["name"])[:16].replace("T", " "))


def trend_data(runs, gate=None):
    """One plot's data per figure (p50, p99, throughput, accuracy): a panel per batch size, the nights' values,
    and the gate's reference and band for tonight's figure (else the earlier nights' median, no band)."""
    labels = [trend_label(r) for r in runs]
    failed = [gatelib.failed_night(r) for r in runs]
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
    failed = sum(gatelib.failed_night(r) for r in runs)
    return ('<h2>Trends over {} runs</h2><p class="note">oldest to newest, labelled by date and commit; the last is this '
            "run. Each batch size has its own axes; {}; the right axis is % of the reference{}.</p>{}").format(
        len(runs), where, "; {} failed night{} (grey crosses), kept in the band".format(failed, "" if failed == 1 else "s")
        if failed else "", "".join(plot(cache, "trend", f) for f in figures))
