"""`deploy check A.pb B.onnx zoo/ --target T`: several models in one process, one verdict each,
then a summary table.

    entries = check_models(["a.pb", "zoo/"], target)   # [ZooEntry(path, report | None, error, code)]
    print(format_zoo(entries, "text")); exit_code(entries)

A folder that is not a SavedModel stands for every model in it, found recursively and sorted by
path: files named .pb, .pbtxt, .onnx, .keras, .h5, .hdf5, .meta, and SavedModel directories
(one model each; nothing inside one is checked on its own). A model that cannot be read is
reported with its one-line error and the others are still checked.

tf2onnx runs over a pool of worker processes, one a core (pipeline.check.pool), each model checked
as its conversion lands, unless ``convert=False`` (--no-convert). Two files of the same trained model
(the same weights, ``model.weights_fingerprint``) with different verdicts are named in each other's
note.

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
    same_model: Optional[list] = None  # other files of the same trained model with another verdict

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


def check_models(paths, target, routes=None, signature="serving_default", convert=None, convert_timeout=None,
                 predict=None, progress=None, answers=None):
    """Check each model of ``paths`` (folders expanded) against ``target``; never stops at a bad one.
    ``convert``, ``convert_timeout``, ``predict``: as check_model's (--no-convert, --convert-timeout, the
    rewrite prediction). ``progress``: each model's verdict line as it lands ("[3/12] a.pb: YES ..."),
    the slow steps of each; ``answers``: a pipeline.check.cache.AnswerCache (read and written per model).

    tf2onnx runs over ``convert_probe``'s worker pool (every core this process may use, one TensorFlow
    import per worker, one model a worker at a time): frozen graphs converted, Keras files and
    SavedModels frozen then converted; each model is checked here as its conversion lands."""
    from pipeline.check import check_model, convert_probe
    from pipeline.check.model import converter_opset
    from pipeline.check.pool import model_bytes
    from pipeline.check.worker import release_memory
    from pipeline.progress import Progress

    progress = progress or Progress("quiet")
    for route in routes or ():
        if route not in target.routes:
            raise DeployError("--route {}: {} has no {} route (it has: {})".format(
                route, target.name, route, ", ".join(target.routes)))
    found = expand(paths)
    if len(found) == 1 and found[0][1]:  # one folder and nothing in it: one error, as for one bad model
        raise DeployError(found[0][1])
    entries = [None] * len(found)
    extra = {"convert": convert, "convert_timeout": convert_timeout, "predict": predict}

    def finish(i):
        path, error = found[i]
        if error:
            entries[i] = ZooEntry(path, error=error, code=EXIT_BAD_INPUT)
        else:
            label = "{} ({} of {})".format(path, i + 1, len(found))
            entries[i] = _check_one(check_model, path, target, routes, signature, dict(extra, label=label), progress,
                                    answers)
        done = sum(e is not None for e in entries)
        progress.log("[{}/{}] {}".format(done, len(found), verdict_line(entries[i])))
        release_memory()  # the graph and ONNX model read for it: back to the OS while the workers convert

    todo = []
    for i, (path, error) in enumerate(found):
        report = answers.get(path) if answers is not None and not error else None
        if report is not None:
            entries[i] = ZooEntry(path, report, code=EXIT_OK if report.deployable else EXIT_NOT_DEPLOYABLE)
            progress.log("[{}/{}] {} (from the check cache)".format(sum(e is not None for e in entries), len(found),
                                                                     verdict_line(entries[i])))
        else:
            todo.append(i)
    jobs = []
    if convert is not False and "onnx" in (routes or target.routes) and target.op_table_for("onnx") \
            and convert_probe.available():
        opset = converter_opset(target)
        jobs = [(i, _conversion_job(found[i][0], opset, signature, convert_timeout),
                 model_bytes(found[i][0])) for i in todo if _converts(found[i])]
    for i in todo:
        if i not in {key for key, _, _ in jobs}:
            finish(i)  # nothing to convert (ONNX, a .meta, an error): checked at once
    if jobs:
        from pipeline.check.pool import plan, run_pool

        convert_probe.workdir()
        workers, budget = plan([nbytes for _, _, nbytes in jobs])
        progress.log("converting {} model{} with tf2onnx over {} worker{} (memory budget {} MB) ...".format(
            len(jobs), "" if len(jobs) == 1 else "s", workers, "" if workers == 1 else "s", budget >> 20))
        run_pool(jobs, workers=workers, max_bytes=budget, on_done=lambda i, _: finish(i))
    _same_model_notes(entries)
    return entries


def _converts(item):
    path, error = item
    if error:
        return False
    p = Path(path)
    if p.is_dir():
        from pipeline.tf.screen import trusted

        return _is_saved_model(p) and trusted()  # see check.model._freezable
    return p.suffix.lower() in (".pb", ".pbtxt", ".keras", ".h5", ".hdf5") and p.is_file() \
        and p.name not in SAVED_MODEL_FILES


def _conversion_job(path, opset, signature, timeout):
    """What a pool worker does for one model: freeze it when it is a Keras file or SavedModel, convert it."""
    def job(worker):
        from pipeline.check import convert_probe
        from pipeline.check.model import FREEZABLE_SUFFIXES

        source = path
        if Path(path).is_dir() or Path(path).suffix.lower() in FREEZABLE_SUFFIXES:
            source, _ = convert_probe.freeze_on(worker, path, signature, timeout)
            if source is None:
                return None  # refused: check_model reads it its own way
        return convert_probe.convert_on(worker, source, opset, timeout)

    return job


def _check_one(check, path, target, routes, signature, extra, progress, answers):
    try:
        report = check(path, target, routes=routes, signature=signature, progress=progress, fingerprint=True,
                       **extra)
    except DeployError as e:
        return ZooEntry(path, error=_first_line(e.message), code=e.code)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except Exception as e:  # a reader's bug must not hide the other models' answers
        return ZooEntry(path, error="{}: deploy failed reading it ({}: {}); please report this".format(
            path, type(e).__name__, _first_line(str(e))), code=EXIT_BAD_INPUT)
    if answers is not None:
        answers.put(path, report)
    return ZooEntry(path, report, code=EXIT_OK if report.deployable else EXIT_NOT_DEPLOYABLE)


def verdict_line(entry):
    """"model.pb: YES — onnx at opset 13, 0 blockers" (one line, as a zoo prints each model's as it lands)."""
    if entry.report is None:
        return "{}: ERROR — {}".format(entry.path, entry.error)
    from pipeline.check.report import predicted_label

    row = dict(zip(_HEADER, summary_row(entry)))
    return "{}: {}{} — {}, {} blocker{}{}".format(
        entry.path, entry.verdict, predicted_label(entry.report), row["recommended route"], row["blockers"],
        "" if row["blockers"] == "1" else "s", "; " + row["note"] if row["note"] else "")


def _same_model_notes(entries):
    """Two files of one trained model (the same weights fingerprint, pipeline.check.model.weights_fingerprint)
    with different verdicts: each entry's ``same_model`` names the others, so the table says so."""
    groups = {}
    for e in entries:
        fp = getattr(e.report, "fingerprint", None) if e.report is not None else None
        if fp:
            groups.setdefault(fp, []).append(e)
    for group in groups.values():
        if len(group) > 1 and len({e.verdict for e in group}) > 1:
            for e in group:
                e.same_model = ["{} ({})".format(o.path, o.verdict) for o in group if o is not e]


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
    return [summary_row(e) for e in entries]


def summary_row(e):
    if e.report is None:
        return (e.path, "ERROR", "-", "-", e.error)
    best = e.report.recommended
    if best is None:
        return (e.path, e.verdict, "none", "-", "no route applies")
    from pipeline.check.report import predicted_label

    blockers, wrong = e.report.total_blockers(best.route), e.report.wrong(best.route)
    route = best.route + (" at opset {}".format(best.opset) if best.opset else "")
    notes = ["{} accepted but wrong".format(wrong)] if wrong else []
    if predicted_label(e.report):
        notes.append("predicted, tf2onnx not run")
    p = e.report.prediction
    if p:
        notes.append("after `deploy rewrite --auto`: {}".format(p["verdict"]))
    if e.same_model:
        notes.append("the same model (same weights) as {}: two verdicts for one model".format(", ".join(e.same_model)))
    return (e.path, e.verdict, route, str(blockers), "; ".join(notes))


_HEADER = ("model", "verdict", "recommended route", "blockers", "note")
_TABLE = _HEADER[:4] + ("estimate",) + _HEADER[4:]  # the printed table: deploy check's latency estimate before the note


def table_rows(entries):
    """summary_rows with the estimate column (pipeline.check.report.estimate_cell) before the note."""
    from pipeline.check.report import estimate_cell

    return [row[:4] + (estimate_cell(e.report),) + row[4:] for e, row in zip(entries, summary_rows(entries))]


def summary_line(entries):
    counts = [sum(e.verdict == v for e in entries) for v in ("YES", "NO", "ERROR")]
    return "{} model{}: {} YES, {} NO, {} not readable".format(
        len(entries), "" if len(entries) == 1 else "s", *counts)


def summary_table(entries):
    """The summary as an aligned plain-text table."""
    rows = [_TABLE] + table_rows(entries)
    widths = [max(len(r[i]) for r in rows) for i in range(len(_TABLE) - 1)]
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
        out.append(one(e.report, next_step=True) if e.report is not None else "error: " + e.error)
        out.append("")
    out.append("summary: " + summary_line(entries))
    out += summary_table(entries)
    return "\n".join(out)


def format_json(entries):
    """A JSON list, one object per model in the order checked: the single-model object
    (schema deploy.check/2) or, for a model that could not be read, {"schema", "model": {"path"},
    "verdict": "ERROR", "deployable": false, "error", "exit_code"}."""
    from pipeline.check.report import report_dict

    items = []
    for e in entries:
        if e.report is not None:
            items.append(report_dict(e.report))
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
           "| " + " | ".join(_TABLE) + " |", "|---" * len(_TABLE) + "|"]
    for row in table_rows(entries):
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
