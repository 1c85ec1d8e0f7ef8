"""The run report in Markdown: a CI job summary (GitHub's ``$GITHUB_STEP_SUMMARY``) or a PR comment.

Everything taken from the run folder is text, never markup: GitHub renders raw HTML inside Markdown,
so ``<``, ``>`` and ``&`` are escaped as the HTML report escapes them."""

import html

from pipeline.report import machine
from pipeline.report import provenance as runinfo
from pipeline.report import verdict as gatelib
from pipeline.report.collect import results_by_batch
from pipeline.report.html_parts import VERDICT_WORD, fmt


def _text(value):
    """A value from the run folder as inert Markdown text on one line."""
    return html.escape(str(value), quote=False).replace("\n", " ")


def _row(cells):
    return "| " + " | ".join(_text(c).replace("|", "\\|") for c in cells) + " |"


def _table(header, rows):
    return [_row(header), _row(["---"] * len(header))] + [_row(r) for r in rows]


def render_markdown(run, gate=None):
    """The summary: the gate's verdict and why first, then what the run is (board, JetPack, TensorRT, power
    mode, clocks, commit), the stages and the figures."""
    record = run.get("record") or {}
    check = run.get("check") or {}
    lines = ["## deploy: {}".format(_text(run["name"])), ""]
    lines += _verdict_lines(run, gate)
    facts = [("target", record.get("target")), ("exit code", record.get("exit_code")), ("finished", record.get("finished")),
             ("check", check.get("verdict"))]
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


def _verdict_lines(run, gate):
    if gate is None:
        return ["**gate: not gated** (no comparison.json: deploy compare did not judge this run)", ""]
    out = ["**gate: {}** ({}) — {}".format(VERDICT_WORD.get(gate["verdict"], gate["verdict"]), _text(gate["verdict"]),
                                             _text(gatelib.headline(gate))), ""]
    out += ["- {}".format(_text(r)) for r in gatelib.other_reasons(gate)]
    bad = [r for r in gate["rows"] if r["status"] in ("regression", "not compared")]
    if bad:
        out += [""] + _table(["figure", "batch", "reference", "tonight", "change", "verdict", "why"], [
            [gatelib.figure_label(r), fmt(r["batch_size"]), fmt(r["reference"] if r["reference"] is not None else r["raw_baseline"], 4),
             fmt(r["current"] if r["current"] is not None else r["raw_current"], 4), gatelib.change_text(r), r["status"], r["note"]]
            for r in gatelib.sorted_rows(bad)])
    return out + [""]
