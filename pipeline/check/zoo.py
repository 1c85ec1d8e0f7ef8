"""`deploy check A.pb B.onnx zoo/ --target T`: several models in one process, one verdict each,
then a summary table.

    entries = check_models(["a.pb", "zoo/"], target)   # [ZooEntry(path, report | None, error, code)]
    print(format_zoo(entries, "text")); exit_code(entries)

A folder that is not a SavedModel stands for every model in it, found recursively and sorted by
path: files named .pb, .pbtxt, .onnx, .keras, .h5, .hdf5, .meta, and SavedModel directories
(one model each; nothing inside one is checked on its own). A model that cannot be read is
reported with its one-line error and the others are still checked.

Frozen graphs are converted by tf2onnx together, in one subprocess, before they are checked
(convert_probe.convert_many), unless ``convert=False`` (--no-convert).

Exit code: the worst of the models', in the order bad input (1: a model could not be read, so the
zoo's answer is incomplete) > NO (2) > YES (0).
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pipeline.errors import EXIT_BAD_INPUT, EXIT_NOT_DEPLOYABLE, EXIT_OK, DeployError

MODEL_SUFFIXES = (".pb", ".pbtxt", ".onnx", ".keras", ".h5", ".hdf5", ".meta")
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
_SEVERITY = {EXIT_OK: 0, EXIT_NOT_DEPLOYABLE: 1, EXIT_BAD_INPUT: 2}  # worst last


@dataclass
class ZooEntry:
    path: str
    report: Optional[object] = None  # CheckReport
    error: str = ""  # one line, when the model could not be checked
    code: int = EXIT_OK

    @property
    def verdict(self):
        if self.report is None:
            return "ERROR"
        return "YES" if self.report.deployable else "NO"


def is_zoo(paths):
    """Several models, or a folder that is not itself a SavedModel."""
    return len(paths) > 1 or (Path(paths[0]).is_dir() and not _is_saved_model(Path(paths[0])))


def _is_saved_model(folder):
    return any((folder / name).is_file() for name in SAVED_MODEL_FILES)


def expand(paths):
    """[(model path, error or "")]: each argument, a folder replaced by the models in it (sorted),
    duplicates (same file reached twice) kept once, at their first place."""
    found, seen = [], set()

    def add(path, error=""):
        key = os.path.realpath(path)
        if key in seen:
            return
        seen.add(key)
        found.append((path, error))

    for arg in paths:
        path = Path(arg)
        if not path.is_dir() or _is_saved_model(path):
            add(str(path))  # a missing or unreadable file is reported when it is checked
            continue
        models = _models_in(path)
        if not models:
            add(str(path), "{}: no model in this folder (looked for {} files and SavedModel directories)".format(
                path, ", ".join(MODEL_SUFFIXES)))
        for model in models:
            add(model)
    return found


def _models_in(folder):
    models = []
    for root, dirs, files in os.walk(str(folder)):
        dirs.sort()
        here = Path(root)
        if here != folder and _is_saved_model(here):
            models.append(str(here))
            dirs[:] = []  # its variables/ and assets/ belong to it
            continue
        for name in sorted(files):
            if Path(name).suffix.lower() in MODEL_SUFFIXES and not (here == folder and name in SAVED_MODEL_FILES):
                models.append(str(here / name))
    return sorted(models, key=lambda p: Path(p).parts)


def check_models(paths, target, routes=None, signature="serving_default", check=None, convert=None,
                 convert_timeout=None, predict=None):
    """Check each model of ``paths`` (folders expanded) against ``target``; never stops at a bad one.
    ``convert``, ``convert_timeout``, ``predict``: as check_model's (--no-convert, --convert-timeout, the
    rewrite prediction)."""
    together = check is None and convert is not False  # check_model's conversions, made together first
    if check is None:
        from pipeline.check import check_model as check
    for route in routes or ():
        if route not in target.routes:
            raise DeployError("--route {}: {} has no {} route (it has: {})".format(
                route, target.name, route, ", ".join(target.routes)))
    found = expand(paths)
    if len(found) == 1 and found[0][1]:  # one folder and nothing in it: one error, as for one bad model
        raise DeployError(found[0][1])
    if together:
        _convert_together([path for path, error in found if not error], target, routes, convert_timeout)
    entries = []
    for path, error in found:
        if error:
            entries.append(ZooEntry(path, error=error, code=EXIT_BAD_INPUT))
            continue
        try:
            extra = {"convert": convert, "convert_timeout": convert_timeout} if convert is not None or convert_timeout else {}
            if predict is not None:
                extra["predict"] = predict
            report = check(path, target, routes=routes, signature=signature, **extra)
        except DeployError as e:
            entries.append(ZooEntry(path, error=_first_line(e.message), code=e.code))
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except Exception as e:  # a reader's bug must not hide the other models' answers
            entries.append(ZooEntry(path, error="{}: deploy failed reading it ({}: {}); please report this".format(
                path, type(e).__name__, _first_line(str(e))), code=EXIT_BAD_INPUT))
        else:
            entries.append(ZooEntry(path, report, code=EXIT_OK if report.deployable else EXIT_NOT_DEPLOYABLE))
    return entries


def _convert_together(paths, target, routes, timeout):
    """Two or more frozen graphs (.pb, .pbtxt) and tf2onnx installed: convert them in one tf2onnx
    subprocess before checking (TensorFlow imported once, not once a model); each check then finds
    its conversion in convert_probe's per-process cache. A graph the run did not answer is converted
    alone when it is checked, as for one model."""
    from pipeline.check import convert_probe

    frozen = [p for p in paths if Path(p).suffix.lower() in (".pb", ".pbtxt") and Path(p).is_file()
              and Path(p).name not in SAVED_MODEL_FILES]
    if "onnx" not in (routes or target.routes):
        return
    if len(frozen) < 2 or not convert_probe.available():
        return
    from pipeline.targets.tf2onnx import load_tf2onnx_table

    opset = min(target.max_opset, load_tf2onnx_table().max_opset)  # what check_graph converts at
    convert_probe.convert_many(frozen, opset, timeout=timeout)


def _first_line(text):
    return (str(text).strip().splitlines() or [""])[0]


def exit_code(entries):
    """The worst exit code: bad input (1) > NO (2) > YES (0); any other code (a reader's) counts as bad input."""
    worst = EXIT_OK
    for e in entries:
        code = e.code if e.code in _SEVERITY else EXIT_BAD_INPUT
        if _SEVERITY[code] > _SEVERITY[worst]:
            worst = code
    return worst


# ----------------------------------------------------------------------------------- output


def summary_rows(entries):
    """[(model, verdict, recommended route, blockers, note)] for the summary table."""
    rows = []
    for e in entries:
        if e.report is None:
            rows.append((e.path, "ERROR", "-", "-", e.error))
            continue
        best = e.report.recommended
        if best is None:
            rows.append((e.path, e.verdict, "none", "-", "no route applies"))
            continue
        blockers, wrong = e.report.total_blockers(best.route), e.report.wrong(best.route)
        route = best.route + (" at opset {}".format(best.opset) if best.opset else "")
        note = "{} accepted but wrong".format(wrong) if wrong else ""
        p = e.report.prediction
        if p:
            note = (note + "; " if note else "") + "after `deploy rewrite --auto`: {}".format(p["verdict"])
        rows.append((e.path, e.verdict, route, str(blockers), note))
    return rows


_HEADER = ("model", "verdict", "recommended route", "blockers", "note")


def summary_line(entries):
    counts = [sum(e.verdict == v for e in entries) for v in ("YES", "NO", "ERROR")]
    return "{} model{}: {} YES, {} NO, {} not readable".format(
        len(entries), "" if len(entries) == 1 else "s", *counts)


def summary_table(entries):
    """The summary as an aligned plain-text table."""
    rows = [_HEADER] + summary_rows(entries)
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER) - 1)]
    lines = []
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + ("  " + r[-1] if r[-1] else ""))
        lines[-1] = lines[-1].rstrip()
    return lines


def format_text(entries):
    from pipeline.check.report import format_text as one

    out = []
    for e in entries:
        out.append("== {} ==".format(e.path))
        out.append(one(e.report) if e.report is not None else "error: " + e.error)
        out.append("")
    out.append("summary: " + summary_line(entries))
    out += summary_table(entries)
    return "\n".join(out)


def format_json(entries):
    """A JSON list, one object per model in the order checked: the single-model object
    (schema deploy.check/2) or, for a model that could not be read, {"schema", "model": {"path"},
    "verdict": "ERROR", "deployable": false, "error", "exit_code"}."""
    items = []
    for e in entries:
        if e.report is not None:
            items.append(e.report.to_dict())
        else:
            items.append({"schema": "deploy.check/2", "model": {"path": e.path}, "verdict": "ERROR",
                          "deployable": False, "error": e.error, "exit_code": e.code})
    return json.dumps(items, indent=2, sort_keys=True)


def _md(text):
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def format_markdown(entries):
    """The summary table first (a CI job summary shows it at the top), then each model's report."""
    from pipeline.check.report import format_markdown as one

    out = ["# deploy check: {} models".format(len(entries)), "", summary_line(entries), "",
           "| " + " | ".join(_HEADER) + " |", "|---|---|---|---|---|"]
    for row in summary_rows(entries):
        out.append("| " + " | ".join(_md(c) if c else "" for c in row) + " |")
    for e in entries:
        out.append("")
        if e.report is not None:
            out.append("#" + one(e.report).rstrip("\n"))  # its "# deploy check: MODEL" one level down
        else:
            out += ["## deploy check: {}".format(_md(e.path)), "", "**Error:** {}".format(_md(e.error))]
    return "\n".join(out) + "\n"


def format_junit(entries):
    """One <testsuites> for the zoo: each model's route suites (as for one model), named and
    classed by the model; a model that could not be read is a suite with one failing case."""
    import re
    from xml.sax.saxutils import escape, quoteattr

    from pipeline.check.report import format_junit as one

    suites = []
    for e in entries:
        label = escape(e.path, {'"': "&quot;"})
        if e.report is None:
            suites.append('  <testsuite name="{0}" tests="1" failures="1" skipped="0">\n'
                          '    <testcase classname="{0}" name="read"><failure message={1}/></testcase>\n'
                          '  </testsuite>'.format(label, quoteattr(e.error)))
            continue
        xml = one(e.report)
        body = xml.split("<testsuites", 1)[1].split(">", 1)[1].rsplit("</testsuites>", 1)[0].strip("\n")
        body = re.sub(r'(name|classname)="deploy\.check\.', lambda m: '{}="{}: deploy.check.'.format(m.group(1), label),
                      body)
        suites.append(body)
    return '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="deploy check">\n{}\n</testsuites>\n'.format(
        "\n".join(suites))


FORMATS = {"text": format_text, "json": format_json, "markdown": format_markdown}
