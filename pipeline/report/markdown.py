"""The run report in Markdown: a CI job summary (GitHub's ``$GITHUB_STEP_SUMMARY``) or a PR comment.

Everything taken from the run folder is text, never markup: GitHub renders raw HTML inside Markdown,
so ``<``, ``>`` and ``&`` are escaped as the HTML report escapes them."""

import html

from pipeline.report import answers as ans
from pipeline.report import machine
from pipeline.report import provenance as runinfo
from pipeline.report import verdict as gatelib
from pipeline.report.collect import results_by_batch
from pipeline.report.html_parts import VERDICT_WORD, fmt
from pipeline.report.job import job_outcome


def _text(value):
    """A value from the run folder as inert Markdown text on one line."""
    return html.escape(str(value), quote=False).replace("\n", " ")


def _row(cells):
    return "| " + " | ".join(_text(c).replace("|", "\\|") for c in cells) + " |"


def _table(header, rows):
    return [_row(header), _row(["---"] * len(header))] + [_row(r) for r in rows]


def render_markdown(run, gate=None, steps=None):
    """The summary, in the HTML page's order: a red job and why, the gate's verdict where a current
    comparison exists (a stale one said to be stale), will it run on the target, what is pending and the
    next command, accuracy and latency; then what the run is (board, JetPack, TensorRT, power mode, clocks,
    commit), the stages and the figures."""
    record = run.get("record") or {}
    job = job_outcome(run, steps)
    lines = ["## deploy: {}".format(_text(run["name"])), ""]
    if job["failed"]:
        lines += ["**job: FAILED** — {}".format(_text("; ".join(job["failures"]))), ""]
    elif job["known"]:
        lines += ["job: every step succeeded ({})".format(_text(", ".join(n for n, _ in job["steps"]))), ""]
    stale = gate is not None and gate.get("stale")
    if gate is not None and not stale:
        lines += _verdict_lines(run, gate, job)
    lines += _answer_lines(run)
    if stale:
        lines += ["**gate: stale comparison** — comparison.json is older than the run's benchmark: {}; it said {} "
                  "then, not about these figures".format(_text(gate["stale"]), _text(gate["verdict"])), ""]
        gate = None
    facts = [("target", record.get("target")), ("exit code", record.get("exit_code")), ("finished", record.get("finished"))]
    lines.append(" · ".join("**{}** {}".format(k, _text(v)) for k, v in facts if v is not None))
    lines.append("")
    fp = machine.fingerprint_items(run, gate)
    prov = runinfo.provenance(run)
    lines.append(" · ".join(["**{}** {}".format(_text(k), _text(v)) for k, v in fp] + [
        "**commit** {}".format(_text(prov["commit"][:12]) if prov["commit"] else "unknown"),
        "**config digest** {}".format(_text(prov["config_digest"][:12]) if prov["config_digest"] else "unknown")]))
    lines.append("")
    if machine.is_host_only(run):
        lines += ["> host CPU figures ({}), not Jetson figures".format(_text(machine.host_cpu(
            (run.get("benchmark") or {}).get("where") or {}) or "CPU not recorded")), ""]
    lines += _table(["stage", "status", "result"], [[s["name"], s.get("status"), s.get("summary") or s.get("message") or ""]
                                                     for s in run["stages"]])
    bench = run.get("benchmark") or {}
    results = sorted(results_by_batch(run).items())
    if results:
        where = bench.get("where") or {}
        lines += ["", "### Latency ({})".format(_text(where.get("note") or "on {}".format(where.get("device") or "the device"))), ""]
        if where.get("hardware"):
            lines += ["measured on: {}".format(_text(where["hardware"])), ""]
        lines += _table(["batch", "p50 ms", "p99 ms", "mean ms", "img/s"], [
            [bs, fmt(r.get("p50_ms")), fmt(r.get("p99_ms")), fmt(r.get("mean_ms")), fmt(r.get("throughput_ips"), 4)]
            for bs, r in results])
        for w in where.get("warnings") or []:
            lines.append("")
            lines.append("> warning: {}".format(_text(w)))
    lines += _estimate_lines(run)
    acc = bench.get("accuracy")
    comparison = run.get("comparison") or {}
    if acc or comparison:
        lines += ["", "### Accuracy", ""]
        rows = []
        if comparison:
            rows.append(["TensorFlow → ONNX", "fp32", fmt(comparison.get("max_abs_diff")), "–"])
        if acc:
            top1 = acc.get("top1_agreement")
            rows.append(["ONNX → engine", (acc.get("tolerance") or {}).get("precision"), fmt(acc.get("max_abs_diff")),
                         "–" if top1 is None else "{:.1%}".format(top1)])
        lines += _table(["comparison", "precision", "max abs diff", "top-1 agreement"], rows)
    for note in runinfo.noise_notes(run, gate):
        lines += ["", "> {}".format(_text(note))]
    cons = bench.get("consistency")
    if cons:
        lines += ["", "**batch consistency** {} (batches of {})".format(
            "pass" if cons.get("passed") else "FAIL", ", ".join(str(b) for b in cons.get("batch_sizes") or []))]
    return "\n".join(lines) + "\n"


def _estimate_lines(run):
    """The offline estimate of the run's graph (pipeline.estimate.summary.run_estimate), labelled as one."""
    from pipeline.estimate.summary import run_estimate

    block = run_estimate(run["dir"]) if run.get("dir") else None
    if not block:
        return []
    lines = ["", "### Estimated latency (offline, not a measurement)", ""]
    if "error" in block:
        return lines + ["no estimate for {}: {}".format(_text(block.get("target")), _text(block["error"]))]
    lines += ["deploy estimate on {} ({}, {}){}".format(
        _text(block["target"]), _text(block["precision"]), _text(block.get("power_mode") or "power mode not stated"),
        "" if block["measured"] else "; no on-board TensorRT figure in this run"), ""]
    lines += _table(["batch", "measured p50 ms", "estimate ms", "range ms", "in range"], [
        [r["batch"], fmt(r["measured_ms"]), fmt(r["latency_ms"]), "{} – {}".format(fmt(r["low_ms"]), fmt(r["high_ms"])),
         "–" if r["inside"] is None else ("yes" if r["inside"] else "no")] for r in block["rows"]])
    return lines + ["", "basis: {}".format(_text(block["basis"]))]


def _answer_lines(run):
    """Will it run on the target and on what basis, what failed or is pending with the next command,
    accuracy against TensorFlow, latency and where it was measured."""
    t = ans.target_answer(run)
    route = " on the {} route ({})".format(_text(t["route"]), _text(t["detail"] or "")) if t["route"] else ""
    basis = "; basis: {}".format(_text(ans.BASIS_WORDS.get(t["basis"], t["basis"]))) if t["basis"] else ""
    why = " — {}".format(_text(t["why"])) if t["why"] and t["answer"] != "YES" else ""
    out = ["**runs on {}: {}**{}{}{}".format(_text(t["target"] or "the target"), t["answer"], route, basis, why), ""]
    for item in ans.open_items(run):
        out.append("- **{}** {}: {}{}".format(_text(item["status"]), _text(item["stage"]), _text(item["why"]),
                                             " — next: `{}`".format(item["next"].replace("`", "'")) if item["next"] else ""))
    acc = ans.accuracy_answer(run)["tensorflow"]
    if acc is not None:
        out.append("- **accuracy vs TensorFlow**: max abs diff {} (tolerance {}){}".format(
            fmt(acc["max_abs_diff"]), fmt(acc["tolerance"]), "" if acc["within"] is not False else " — beyond tolerance"))
    lat = ans.latency_answer(run)
    if lat is not None:
        out.append("- **latency**: {} — {}".format(", ".join("p50 {} ms at batch {} ({} img/s)".format(
            fmt(p50), bs, fmt(ips, 4)) for bs, p50, ips in lat["rows"]), _text(lat["where"])))
    return out + [""]


def _verdict_lines(run, gate, job=None):
    out = ["**gate: {}** ({}) — {}".format(VERDICT_WORD.get(gate["verdict"], gate["verdict"]), _text(gate["verdict"]),
                                             _text(gatelib.headline(gate))), ""]
    if job and job["failed"]:
        out += ["the figures' verdict alone: the job failed", ""]
    out += ["- {}".format(_text(r)) for r in gatelib.other_reasons(gate)]
    bad = [r for r in gate["rows"] if r["status"] in ("regression", "suspect", "not compared")]
    if bad:
        out += [""] + _table(["figure", "batch", "reference", "tonight", "change", "verdict", "why"], [
            [gatelib.figure_label(r), fmt(r["batch_size"]), fmt(r["reference"] if r["reference"] is not None else r["raw_baseline"], 4),
             fmt(r["current"] if r["current"] is not None else r["raw_current"], 4), gatelib.change_text(r), r["status"], r["note"]]
            for r in gatelib.sorted_rows(bad)])
    return out + [""]
