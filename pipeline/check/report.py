"""`deploy check` output: a terminal report, JSON (schema deploy.check/2), Markdown and JUnit XML."""

import json

_SHOWN_NODES = 3


def target_label(t):
    """"JetPack 4.6.6, TensorRT 8.2.1", or what runs the model on a target without TensorRT."""
    if t.get("tensorrt"):
        return "JetPack {}, TensorRT {}".format(t["jetpack"], t["tensorrt"])
    return "{}, no TensorRT".format(t.get("runtime_label") or t.get("runtime") or "no runtime")


def _nodes(names):
    shown = ", ".join(names[:_SHOWN_NODES])
    more = len(names) - _SHOWN_NODES
    return shown + (" (+{} more)".format(more) if more > 0 else "")


def _count(names):
    return " ×{}".format(len(names)) if len(names) > 1 else ""


def _counts(report, route):
    blockers, wrong = report.total_blockers(route), report.wrong(route)
    text = "{} blocker{}".format(blockers, "" if blockers == 1 else "s")
    return text + (", {} accepted but wrong".format(wrong) if wrong else "")


def _share(r):
    if not r.share:
        return ""
    return "; TensorRT runs {:.0%} of the nodes and {:.0%} of the compute{}".format(
        r.share["nodes"], r.share["compute"], " (estimated)" if r.share.get("estimated") else "")


_TFTRT_INFO = ("information only: deploy run takes onnx or uff; TF-TRT runs inside TensorFlow, so the device would "
               "need TensorFlow with TF-TRT, and the nodes TensorRT does not take run in TensorFlow")


def _route_line(report, r):
    if not r.applicable:
        return "{}: N/A ({})".format(r.route, r.note)
    extra = "; " + (r.basis_label if r.basis else r.note) if r.basis or r.note else ""
    if not r.runnable:
        extra += "; " + _TFTRT_INFO
    return "{}: {} — {} ({}; table {}){}{}".format(
        r.route, report.verdict(r.route), _counts(report, r.route), r.detail, r.table, extra, _share(r))


def recommendation(report):
    best = report.recommended
    if best is None:
        return "no route applies"
    parts = []
    for r in sorted((r for r in report.routes if r.applicable), key=lambda r: r is not best):
        parts.append("{}{}: {}{}".format(r.route, " at opset {}".format(r.opset) if r.opset else "", _counts(report, r.route),
                                         " (information only)" if not r.runnable else ""))
    return "; ".join(parts)


def predicted_label(report):
    """" (predicted, tf2onnx not run: WHY; WHAT WOULD MAKE IT CONVERTED)" when the verdict rests on the offline
    prediction of the onnx route, else "". The verdict line carries it, so nobody takes it for tf2onnx's."""
    import os

    from pipeline.check.findings import PREDICTED

    best = report.recommended
    if best is None or best.route != "onnx" or best.basis != PREDICTED:
        return ""
    note = best.note or ""
    if "before conversion" in note:
        return ""  # a NO from findings no conversion would change
    if not note:
        why = "--no-convert: check without it for tf2onnx's real answer"
    elif "not installed" in note:
        if os.environ.get("DEPLOY_CHECK_CONVERT", "").strip().lower() in ("0", "off", "no", "false"):
            why = "DEPLOY_CHECK_CONVERT is off: unset it for tf2onnx's real answer"
        else:
            why = "TensorFlow or tf2onnx is not installed: install deploy[tf] for tf2onnx's real answer"
    elif "converts the frozen graph" in note:
        why = "{}: freeze it (deploy run's freeze stage) and check the .pb for tf2onnx's real answer{}".format(
            note.split("; ", 1)[-1], ", or pass --trust-model to let deploy check load and freeze it"
            if report.model.get("format") == "saved_model" else "")
    else:
        why = "tf2onnx did not answer ({})".format(note)
    return " (predicted, tf2onnx not run: {})".format(why)


def next_command(report):
    """What to run after a YES: deploy run with this model in the shipped config for the target, or a config of
    yours that names it."""
    from pathlib import Path

    if not report.deployable:
        return ""
    from pipeline.files import NOT_A_START, SOURCE_KINDS

    path = Path(report.model["path"])
    if path.suffix.lower() in NOT_A_START:  # deploy run cannot start from it: what to do instead
        return "next: {}  (deploy run starts from {})".format(
            NOT_A_START[path.suffix.lower()][1].format(path=report.model["path"], stem=path.stem), SOURCE_KINDS)
    beyond = _beyond_deploy_run(report)
    if beyond:
        return beyond
    config = Path(__file__).resolve().parents[2] / "configs" / "{}.yaml".format(report.target["name"])
    if config.is_file():
        from pipeline.targets.files import display

        shown = display(config)
    else:
        shown = "CONFIG"
    line = "next: deploy run {} --set model.zoo=null --set model.source={}{}".format(
        shown, report.model["path"], _opt_ins())
    if shown == "CONFIG":
        line += "  (CONFIG: a config with `target: {}`; deploy ships none for it, e.g. `extends: base.yaml` from " \
                "configs/ plus that line)".format(report.target["name"])
    return line


def _opt_ins():
    """The opt-ins this check ran with (--custom-objects, --trust-model): deploy run needs them to load the same model."""
    import os

    from pipeline.tf.keras_model import CUSTOM_OBJECTS_ENV
    from pipeline.tf.screen import trusted

    flags = " --custom-objects {}".format(os.environ[CUSTOM_OBJECTS_ENV]) if os.environ.get(CUSTOM_OBJECTS_ENV) else ""
    return flags + (" --trust-model" if trusted() else "")


def _beyond_deploy_run(report):
    """The next line for a TensorFlow model deploy run cannot take (its convert stage compares, and its benchmark
    feeds, one NHWC image input: pipeline.graph.io.image_input): tf2onnx and trtexec by hand; else ""."""
    from pathlib import Path

    from pipeline.graph.io import image_input

    model = report.model
    inputs = model.get("inputs") or []
    if model.get("kind") != "tensorflow" or not inputs or image_input(inputs) is not None:
        return ""
    onnx = next((r for r in getattr(report, "routes", ()) if r.route == "onnx"), None)
    # the opset the check converted or predicted at (the convert stage's: within tf2onnx's reach), not the parser's max
    opset = onnx.opset if onnx is not None and onnx.opset else report.target.get("max_opset")
    path, stem = model["path"], Path(model["path"]).stem
    at = " --opset {}".format(opset) if opset else ""
    if model.get("format") == "saved_model":
        how = "python -m tf2onnx.convert --saved-model {}{} --output {}.onnx".format(path, at, stem)
    elif str(model.get("format", "")).startswith("frozen"):
        how = "python -m tf2onnx.convert --graphdef {} --inputs {} --outputs {}{} --output {}.onnx".format(
            path, ",".join(i["name"] for i in inputs), ",".join(model.get("outputs") or []), at, stem)
    else:
        how = "convert it with tf2onnx{}".format(" at opset {}".format(opset) if opset else "")
    from pipeline.files import TRTEXEC_BUILD

    return ("next: {}, then on the board: {}  (deploy run compares and benchmarks models with one NHWC image input; "
            "this one has {})".format(how, TRTEXEC_BUILD.format(onnx=stem + ".onnx", engine=stem + ".engine"),
                                      ", ".join("{} {}".format(i["name"], i.get("shape")) for i in inputs)))


def verdict_lines(report):
    """The verdict, what makes it NO, and what `deploy rewrite --auto` would make of it."""
    best = report.recommended
    lines = ["verdict: {}{} — recommended route: {}".format(
        "YES" if report.deployable else "NO", predicted_label(report),
        recommendation(report) if best else "none that deploy run can take (onnx, uff)")]
    if best is not None and best.basis:
        lines.append("  onnx route: " + best.basis_label)
    if report.model.get("checked_as"):
        lines.append("  checked as " + report.model["checked_as"])

    tftrt = report.tftrt
    if tftrt is not None and tftrt.share:
        lines.append("  TF-TRT (information, never the verdict): {} — TensorRT would run {:.0%} of the nodes and {:.0%} of "
                     "the compute{}; the rest runs in TensorFlow, so the device needs TensorFlow with TF-TRT".format(
                         report.verdict("tftrt"), tftrt.share["nodes"], tftrt.share["compute"],
                         " (estimated)" if tftrt.share.get("estimated") else ""))
    p = report.prediction
    if p:
        lines.append("after `deploy rewrite --auto`: {} — {}{} (predicted on the graph in memory; deploy rewrite "
                     "applies the passes and checks the numbers)".format(
                         p["verdict"], "passes " + ", ".join(p["passes"]) if p["passes"] else "no pass applies",
                         "; " + p["remaining"] if p.get("remaining") else ""))
    return lines


def _ms(value):
    return "{:.0f}".format(value) if value >= 10 else "{:.2g}".format(value)


def estimate_line(report):
    """"estimate: ~4.1 ms per image (2.9–5.4) at fp16 batch 1 on AGX Xavier, MAXN assumed — bound by compute;
    ..." from ``report.estimate`` (pipeline.estimate.summary.check_estimate's block, set by deploy check outside
    the cached answer), "estimate: not made — why", or "" when deploy check made none (--no-estimate, the run's
    check stage). Never part of the verdict."""
    e = getattr(report, "estimate", None)
    if not e:
        return ""
    if not e.get("made"):
        return "estimate: not made — {}".format(e.get("reason") or "no reason given")
    line = "estimate: ~{} ms per image ({}–{}) at {} batch {} on {}, {} assumed — bound by {}".format(
        _ms(e["latency_ms"]), _ms(e["low_ms"]), _ms(e["high_ms"]), e["precision"], e["batch"], e["board"],
        e["power_mode"], e["bound"] if e["bound"] != "launch" else "per-layer launch overhead")
    if e.get("unknown_layers"):
        line += "; {} layer{} of unknown shape not counted".format(e["unknown_layers"],
                                                                    "" if e["unknown_layers"] == 1 else "s")
    if not report.deployable:
        line += "; the engine once the blockers are fixed (the verdict is NO)"
    return line + "; `deploy estimate` for the layers"


def estimate_cell(report):
    """The zoo table's estimate column: "4.1 ms (2.9–5.4)", "-" (none made) or "not made"."""
    e = getattr(report, "estimate", None) if report is not None else None
    if not e:
        return "-"
    if not e.get("made"):
        return "skipped" if str(e.get("reason", "")).startswith("skipped") else "not made"
    return "{} ms ({}–{})".format(_ms(e["latency_ms"]), _ms(e["low_ms"]), _ms(e["high_ms"]))


def report_dict(report):
    """``report.to_dict()`` with deploy check's ``estimate`` block when it made one (schema deploy.check/2: the
    key is optional)."""
    data = report.to_dict()
    e = getattr(report, "estimate", None)
    if e is not None:
        data["estimate"] = e
    return data


def _finding_lines(f, indent="  "):
    head = "{}{:<7} {}{}".format(indent, f.severity.upper(), f.op or f.kind, _count(f.nodes))
    lines = [head + (": " + _nodes(f.nodes) if f.nodes else "")]
    lines.append(indent + "        why: " + f.cause)
    lines.append(indent + "        fix: " + f.fix + (" [rewrite {}]".format(f.rewrite) if f.rewrite else ""))
    return lines


def signature_lines(model):
    """A SavedModel's signatures, one line each, when it has more than one (the checked one is the
    ``--signature``, default serving_default)."""
    signatures = model.get("signatures")
    if not signatures or len(signatures) < 2:
        return []
    from pipeline.graph.tf_reader import describe_signatures

    return describe_signatures(signatures)


def format_text(report, next_step=False):
    """The terminal report; ``next_step``: end a YES with the command to run next (deploy check's own output,
    not deploy run's check stage)."""
    m, t = report.model, report.target
    lines = ["{} ({}, {} nodes, {} op types) for {} ({})".format(
        m["path"], m["format"], m["nodes"], m["op_types"], t["name"], target_label(t))]
    lines += ["  " + line for line in signature_lines(m)]
    for r in report.routes:
        lines.append("")
        lines.append(_route_line(report, r))
        for f in sorted(r.findings, key=lambda f: ("blocker", "warning", "info").index(f.severity)):
            lines += _finding_lines(f)
    common = [f for f in report.findings]
    if common:
        lines.append("")
        lines.append("every route:")
        for f in sorted(common, key=lambda f: ("blocker", "warning", "info").index(f.severity)):
            lines += _finding_lines(f)
    wrong = [f for r in report.routes for f in r.accepted_but_wrong]
    if wrong:
        lines.append("")
        lines.append("accepted but wrong at inference (converts without error, behaves differently; the route is NO):")
        for f in wrong:
            lines += _finding_lines(f)
            lines[-3] = lines[-3].replace("WARNING", f.route, 1)
    lines.append("")
    lines += verdict_lines(report)
    if estimate_line(report):
        lines.append(estimate_line(report))
    if next_step and next_command(report):
        lines.append(next_command(report))
    return "\n".join(lines)


def format_json(report):
    return json.dumps(report_dict(report), indent=2, sort_keys=True)


def format_markdown(report):
    m, t = report.model, report.target
    out = ["# deploy check: {}".format(m["path"]), "",
           "Target **{}** ({}). Model: {}, {} nodes.".format(t["name"], target_label(t), m["format"], m["nodes"]),
           "", "**Verdict: {}** — {}".format("YES" if report.deployable else "NO", recommendation(report)), ""]
    if signature_lines(m):
        out[4:4] = ["- " + line for line in signature_lines(m)] + [""]
    out += ["> " + line for line in verdict_lines(report)[1:]]
    if estimate_line(report):
        out += ["", estimate_line(report)]
    out += ["", "| route | verdict | blockers | accepted but wrong | table | detail |", "|---|---|---|---|---|---|"]
    for r in report.routes:
        b = report.total_blockers(r.route) if r.applicable else "-"
        w = report.wrong(r.route) if r.applicable else "-"
        out.append("| {} | {} | {} | {} | {} | {} |".format(r.route, report.verdict(r.route), b, w, r.table or "-",
                                                           (r.detail or r.note) + _share(r)))
    rows = [f for r in report.routes for f in r.findings] + report.findings + [f for r in report.routes for f in r.accepted_but_wrong]
    if rows:
        out += ["", "| severity | route | op | nodes | why | fix |", "|---|---|---|---|---|---|"]
        for f in rows:
            out.append("| {} | {} | {} | {} | {} | {} |".format(
                "accepted but wrong" if f.kind == "accepted_but_wrong" else f.severity, f.route, f.op or f.kind,
                "{} ({})".format(_nodes(f.nodes), len(f.nodes)), f.cause.replace("|", "\\|"),
                (f.fix + (" (rewrite `{}`)".format(f.rewrite) if f.rewrite else "")).replace("|", "\\|")))
    return "\n".join(out) + "\n"


def format_junit(report):
    """One test suite per route. On the recommended route, each thing that makes the verdict NO
    (blocker, accepted-but-wrong finding) is a failing test case; the other routes' blockers are
    reported as skipped cases (not the route to take), so a CI gate fails exactly when the verdict is NO."""
    from xml.sax.saxutils import escape, quoteattr

    best = report.recommended
    suites = []
    for r in report.routes:
        if not r.applicable:
            continue
        chosen = best is not None and r.route == best.route
        cases, failures, skipped = [], 0, 0
        problems = [f for f in r.findings + report.findings if f.severity == "blocker" and f.route in (r.route, "all")]
        problems += r.accepted_but_wrong
        for f in problems:
            message = "{}{}: {}".format("accepted but wrong: " if f.kind == "accepted_but_wrong" else "", f.op or f.kind,
                                        f.cause)
            body = escape("nodes: {}\nfix: {}".format(", ".join(f.nodes), f.fix))
            if chosen:
                outcome = "<failure message={}>{}</failure>".format(quoteattr(message), body)
                failures += 1
            else:
                outcome = "<skipped message={}/><system-out>{}</system-out>".format(
                    quoteattr("not the recommended route ({}): {}".format(best.route if best else "none", message)), body)
                skipped += 1
            cases.append('    <testcase classname="deploy.check.{}" name={}>{}</testcase>'.format(
                r.route, quoteattr("{} {}".format(f.op or f.kind, _nodes(f.nodes))), outcome))
        verdict_fails = chosen and bool(problems)
        cases.append('    <testcase classname="deploy.check.{}" name="{} on {}"{}'.format(
            r.route, r.route, report.target["name"],
            ">" + '<failure message="verdict NO: {} blocker(s), {} accepted but wrong"/></testcase>'.format(
                report.total_blockers(r.route), report.wrong(r.route)) if verdict_fails else "/>"))
        failures += 1 if verdict_fails else 0
        suites.append('  <testsuite name="deploy.check.{}" tests="{}" failures="{}" skipped="{}">\n{}\n  </testsuite>'.format(
            r.route, len(cases), failures, skipped, "\n".join(cases)))
    return '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="deploy check">\n{}\n</testsuites>\n'.format("\n".join(suites))


FORMATS = {"text": format_text, "json": format_json, "markdown": format_markdown}
