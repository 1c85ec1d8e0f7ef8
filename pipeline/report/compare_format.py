"""A comparison (pipeline.report.compare.compare_runs) as a text table, GitHub markdown or JUnit XML."""

from pipeline.report.gate_stats import COMPARED

def _cell(value, change=False):
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "pass" if value else "FAIL"
    if change:
        return "{:+.1%}".format(value)
    return "{:.4g}".format(value) if isinstance(value, float) else str(value)


def _change(r):
    if r["change"] is None:
        return "–"
    return "{:+.3g}".format(r["change"]) if r["figure"] == "accuracy" else "{:+.1%}".format(r["change"])


def _band(r):
    if r.get("band") is None:
        return "–"
    return "{:.4g}–{:.4g}".format(*r["band"])


def _interval(r):
    iv = r.get("interval")
    if not iv:
        return "–"
    return "{}–{}".format(*("∞" if v is None else "{:.4g}".format(v) for v in iv))


HEADER = ["figure", "reference", "tonight", "change", "95 % interval", "band", "status", "note"]


def _lines(result):
    return [[r["label"], _cell(r["reference"]), _cell(r["current"]), _change(r), _interval(r), _band(r), r["status"],
             r["note"]] for r in result["rows"]]


def _summary(result):
    ref = result["reference"]
    return "{}: {} ({} vs {}; reference: median of {} night{}{}, tolerance {:.0%}, k {:g}; {})".format(
        result["verdict"].upper(), "; ".join(result["reasons"]) or "{} figures compared".format(
            sum(1 for r in result["rows"] if r["status"] in COMPARED)),
        result["current"]["dir"], result["baseline"]["dir"], ref["nights"], "" if ref["nights"] == 1 else "s",
        ", {} failed".format(ref["failed_nights"]) if ref["failed_nights"] else "", result["tolerance"], result["k"],
        result["hardware"]["label"])


def format_text(result):
    rows = [HEADER] + _lines(result)
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(HEADER) - 1)]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
    out += ["note: " + n for n in result["notes"]]
    out.append(_summary(result))
    return "\n".join(out)


def _md(text):
    from html import escape

    return escape(str(text), quote=False).replace("|", "\\|")


def format_markdown(result):
    verdict = result["verdict"]
    head = {"pass": "pass", "suspect": "**suspect** (amber: out of band tonight, red only if it persists)",
            "throttled": "**throttled** (amber: flagged, not judged)"}.get(verdict, "**{}**".format(verdict))
    out = ["### deploy compare: {} — {}".format(head, _md(result["hardware"]["label"])), ""]
    out += ["> " + _md(r) for r in result["reasons"]]
    out += ["", "| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    for line in _lines(result):
        if line[6] in ("regression", "suspect"):
            line[6] = "**{}**".format(line[6])
        out.append("| " + " | ".join(_md(c) for c in line) + " |")
    ref = result["reference"]
    out += ["", "Reference: median of {} night{} on the baseline's fingerprint ({} failed), baseline {}.".format(
        ref["nights"], "" if ref["nights"] == 1 else "s", ref["failed_nights"], _md(result["baseline"]["dir"]))]
    out += ["", *("- " + _md(n) for n in result["notes"])]
    return "\n".join(out).rstrip() + "\n"


def format_junit(result):
    from xml.sax.saxutils import quoteattr

    cases = []
    for r in result["rows"]:
        body = ""
        if r["status"] == "regression":
            body = "<failure message={}/>".format(quoteattr("{}: {} -> {} ({})".format(
                r["label"], _cell(r["reference"]), _cell(r["current"]), r["note"])))
        cases.append('  <testcase classname="deploy.compare" name={}>{}</testcase>'.format(quoteattr(r["label"]), body))
    failures = result["regressions"]
    if result["verdict"] in ("not comparable", "no data"):
        cases.append('  <testcase classname="deploy.compare" name="verdict"><failure message={}/></testcase>'.format(
            quoteattr("{}: {}".format(result["verdict"], "; ".join(result["reasons"])))))
        failures += 1
    return ('<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="deploy compare" tests="{}" failures="{}">\n{}\n'
            "</testsuite>\n").format(len(cases), failures, "\n".join(cases))
