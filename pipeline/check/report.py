"""`deploy check` output: a terminal report, JSON (schema deploy.check/1), Markdown and JUnit XML."""

import json

_SHOWN_NODES = 3


def _nodes(names):
    shown = ", ".join(names[:_SHOWN_NODES])
    more = len(names) - _SHOWN_NODES
    return shown + (" (+{} more)".format(more) if more > 0 else "")


def _count(names):
    return " ×{}".format(len(names)) if len(names) > 1 else ""


def _route_line(report, r):
    if not r.applicable:
        return "{}: N/A ({})".format(r.route, r.note)
    blockers = report.total_blockers(r.route)
    verdict = "YES" if blockers == 0 else "NO"
    extra = "; " + r.note if r.note else ""
    return "{}: {} — {} blocker{} ({}; table {}){}".format(
        r.route, verdict, blockers, "" if blockers == 1 else "s", r.detail, r.table, extra)


def recommendation(report):
    best = report.recommended
    if best is None:
        return "no route applies"
    parts = []
    for r in sorted((r for r in report.routes if r.applicable), key=lambda r: r is not best):
        parts.append("{}{}: {} blocker{}".format(r.route, " at opset {}".format(r.opset) if r.opset else "",
                                                  report.total_blockers(r.route), "" if report.total_blockers(r.route) == 1 else "s"))
    return "; ".join(parts)


def _finding_lines(f, indent="  "):
    head = "{}{:<7} {}{}".format(indent, f.severity.upper(), f.op or f.kind, _count(f.nodes))
    lines = [head + (": " + _nodes(f.nodes) if f.nodes else "")]
    lines.append(indent + "        why: " + f.cause)
    lines.append(indent + "        fix: " + f.fix + (" [rewrite {}]".format(f.rewrite) if f.rewrite else ""))
    return lines


def format_text(report):
    m, t = report.model, report.target
    lines = ["{} ({}, {} nodes, {} op types) for {} (JetPack {}, TensorRT {})".format(
        m["path"], m["format"], m["nodes"], m["op_types"], t["name"], t["jetpack"], t["tensorrt"])]
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
        lines.append("accepted but wrong at inference (converts without error, behaves differently):")
        for f in wrong:
            lines += _finding_lines(f)
            lines[-3] = lines[-3].replace("WARNING", f.route, 1)
    lines.append("")
    best = report.recommended
    verdict = "YES" if report.deployable else "NO"
    lines.append("verdict: {} — recommended route: {}".format(verdict, recommendation(report) if best else "none"))
    return "\n".join(lines)


def format_json(report):
    return json.dumps(report.to_dict(), indent=2, sort_keys=True)


def format_markdown(report):
    m, t = report.model, report.target
    out = ["# deploy check: {}".format(m["path"]), "",
           "Target **{}** (JetPack {}, TensorRT {}). Model: {}, {} nodes.".format(t["name"], t["jetpack"], t["tensorrt"], m["format"], m["nodes"]),
           "", "**Verdict: {}** — {}".format("YES" if report.deployable else "NO", recommendation(report)), "",
           "| route | verdict | blockers | table | detail |", "|---|---|---|---|---|"]
    for r in report.routes:
        b = report.total_blockers(r.route) if r.applicable else "-"
        v = "N/A" if not r.applicable else ("YES" if b == 0 else "NO")
        out.append("| {} | {} | {} | {} | {} |".format(r.route, v, b, r.table or "-", r.detail or r.note))
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
    """One test suite per route; each blocker a failing test case, the route verdict a test case."""
    from xml.sax.saxutils import escape, quoteattr

    suites = []
    for r in report.routes:
        if not r.applicable:
            continue
        cases = []
        blockers = [f for f in r.findings + report.findings if f.severity == "blocker" and f.route in (r.route, "all")]
        for f in blockers:
            message = "{}: {}".format(f.op or f.kind, f.cause)
            cases.append('    <testcase classname="deploy.check.{}" name={}><failure message={}>{}</failure></testcase>'.format(
                r.route, quoteattr("{} {}".format(f.op or f.kind, _nodes(f.nodes))), quoteattr(message),
                escape("nodes: {}\nfix: {}".format(", ".join(f.nodes), f.fix))))
        cases.append('    <testcase classname="deploy.check.{}" name="{} on {}"{}'.format(
            r.route, r.route, report.target["name"],
            ">" + '<failure message="{} blockers"/></testcase>'.format(len(blockers)) if blockers else "/>"))
        suites.append('  <testsuite name="deploy.check.{}" tests="{}" failures="{}">\n{}\n  </testsuite>'.format(
            r.route, len(cases), len(blockers) + (1 if blockers else 0), "\n".join(cases)))
    return '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="deploy check">\n{}\n</testsuites>\n'.format("\n".join(suites))


FORMATS = {"text": format_text, "json": format_json, "markdown": format_markdown}
