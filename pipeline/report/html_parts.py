"""The HTML report's small parts: escaping, number formatting, badges, tables, plots, and the CSS
classes a status or verdict gets (pipeline.report.html puts the page together)."""

import html

from pipeline.report.plots import cached_svg

STATUS_CLASS = {"ran": "ok", "cached": "muted", "done": "ok", "pending": "warn", "skipped": "muted", "failed": "bad",
                "not run": "bad"}
ROW_CLASS = {"regression": "bad", "suspect": "warn", "not compared": "warn", "noise": "muted", "improved": "ok", "ok": "ok"}
VERDICT_WORD = {"pass": "PASS", "suspect": "SUSPECT", "throttled": "THROTTLED", "regression": "REGRESSION",
                "not comparable": "NOT COMPARABLE", "no data": "NO DATA"}


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
