"""The HTML report's per-stage sections (``SECTIONS``, in page order): the model, the stages, the device,
check, rewrite, accuracy, benchmark, the offline estimate, batch consistency and training. Each takes (run, cache) and
returns its HTML, or "" when the run has no data for it."""


from pipeline.report import model_facts as modelinfo
from pipeline.report import machine
from pipeline.report import provenance as runinfo
from pipeline.report.collect import results_by_batch
from pipeline.report.html_parts import STATUS_CLASS, badge, esc, fmt, plot, table

def _model(run, cache):
    """What the model is: its files' sizes, parameters, FLOPs, and the engine's settings (also while the
    engine is pending: from the config the run used)."""
    facts = modelinfo.model_facts(run, cache)
    settings = modelinfo.engine_settings(run)
    if not facts["files"] and facts["parameters"] is None and facts["flops"] is None and settings is None:
        return ""
    rows = [[esc(what), "<code>{}</code> {} bytes ({})".format(esc(name), "{:,}".format(size), esc(_bytes(size)))]
            for what, name, size in facts["files"]]
    rows.append(["parameters", ("{:,} <span class=\"note\">({})</span>".format(facts["parameters"], esc(facts["parameters_source"]))
                                if facts["parameters"] is not None else "unknown <span class=\"note\">({})</span>".format(
                                    esc(facts["parameters_source"])))])
    rows.append(["FLOPs", ("{} <span class=\"note\">({})</span>".format(esc(_si(facts["flops"])), esc(facts["flops_note"]))
                           if facts["flops"] else "unknown <span class=\"note\">({})</span>".format(esc(
                               facts["flops_note"] or "deploy check's TF-TRT route estimates them for TensorFlow graphs; "
                                                      "it did not run")))])
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
    if machine.is_host_only(run):
        cpu = machine.host_cpu(where)
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
    notes = runinfo.noise_notes(run)
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


def _estimate(run, cache):
    """The offline estimate (pipeline.estimate) of the run's graph: beside the board's measured p50 where a
    board measured it, else for run.json's target; labelled as an estimate, with its basis."""
    from pipeline.estimate.summary import run_estimate

    block = run_estimate(run["dir"]) if run.get("dir") else None
    if not block:
        return ""
    head = "<h2>Estimated latency (offline, not a measurement)</h2>"
    if "error" in block:
        return head + '<p class="note">no estimate for {}: {}</p>'.format(esc(block.get("target")), esc(block["error"]))
    rows = [[fmt(r["batch"]), fmt(r["measured_ms"]), fmt(r["latency_ms"]),
             "{} – {}".format(fmt(r["low_ms"]), fmt(r["high_ms"])),
             "–" if r["measured_ms"] is None else "{:+.0%}".format(r["measured_ms"] / r["latency_ms"] - 1),
             "–" if r["inside"] is None else badge("inside" if r["inside"] else "outside", "ok" if r["inside"] else "warn")]
            for r in block["rows"]]
    measured = ("measured p50 on the board beside it" if block["measured"]
                else "no on-board TensorRT figure in this run: the estimate alone")
    return head + '<p class="note">{}</p>'.format(esc(
        "deploy estimate's roofline model of the engine on {} ({}, {}); {}".format(
            block["target"], block["precision"], block.get("power_mode") or "power mode not stated", measured))) + table(
        ["batch", "measured p50 ms", "estimate ms", "range ms", "measured vs estimate", "in range"], rows,
        numeric=(0, 1, 2, 4)) + '<p class="note">basis: {} — see docs/estimate.md for its error on published ' \
        'figures</p>'.format(esc(block["basis"]))


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
    iv = runinfo.quantile_interval(r, 0.99)
    if iv is None:
        return "–"
    lo, hi = iv
    if hi is None:
        return "≥ {} (open: {} calls)".format(fmt(lo), fmt(r.get("iterations")))
    return "[{}, {}]".format(fmt(lo), fmt(hi))


def _mw(v):
    return "–" if v is None else "{:.0f}".format(v)


SECTIONS = (_stages, _model, _device, _check, _rewrite, _accuracy, _benchmark, _estimate, _consistency, _training)
