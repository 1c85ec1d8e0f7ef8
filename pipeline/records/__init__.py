"""The files deploy writes into a run folder, written and read through one schema each (issue 22).

``write(path, data, kind=None)`` checks ``data`` against its model (pipeline.records.models), adds
``schema: deploy.<kind>/<version>`` and writes it atomically (pipeline.files); ``read(path, kind)``
parses the file and checks it against the same model, so what the writer writes is what the reader
takes. A file that is not a regular file (a named pipe, a device: pipeline.files.read_regular) or over
256 MiB, does not parse, has the wrong shape at any depth or impossible values (NaN or infinity under
any key, a latency outside 1e-9..1e9 ms, a batch size outside 1..65,536, a whole number no float holds,
percentiles that are not 101 ascending numbers: the ranges are pipeline.records.fields's), is another
kind of file or was written by a newer deploy is one DeployError line naming the file, the key and what
was expected (exit 1).

A file without ``schema`` (written before deploy stamped them) is read as version 1 of its kind. The
models allow keys they do not name (a newer deploy may add keys within a version); the keys they name
are checked. ``read`` returns the file's own dict (not a model): renderers see exactly what is there.
"""

import json
import math
import re
from pathlib import Path

from pipeline.errors import DeployError
from pipeline.records.models import ERROR, MODELS


# -------------------------------------------------------------------------------------------------- API



SCHEMA_KEY = "schema"
_SCHEMA = re.compile(r"^deploy\.([a-z_]+)/([0-9]+)$")
_BY_FILE_NAME = {"run.json": "run", "manifest.json": "manifest", "benchmark.json": "benchmark",
                 "check.json": "check", "rewrite.json": "rewrite", "history.json": "history", "engine.json": "engine"}
# comparison.json is two kinds: the convert stage's (conversion) and the gate's (comparison): name it


def schema_of(kind):
    """``deploy.<kind>/<version>``: what this deploy writes for ``kind``."""
    model = _model(kind)
    return "deploy.{}/{}".format(model.NAME, model.VERSION)


def _model(kind):
    try:
        return MODELS[kind]
    except KeyError:
        raise ValueError("no record kind {!r} (kinds: {})".format(kind, ", ".join(sorted(MODELS))))


def kind_for(path):
    """The kind of a file from its name (``x.rewrite.json`` is a rewrite receipt), else None."""
    name = Path(path).name
    if name.endswith(".rewrite.json"):
        return "rewrite"
    return _BY_FILE_NAME.get(name)


def read(path, kind, missing_ok=True):
    """The JSON object at ``path``, checked against ``kind``'s schema; None when the file does not exist
    (and ``missing_ok``). Anything else that is wrong is one DeployError line naming the file and key."""
    from pipeline.files import RECORD_BYTES, read_regular

    model = _model(kind)
    try:  # a regular file of at most 256 MiB: a named pipe, a device or a link to one is refused by name
        data = json.loads(read_regular(path, model.WHAT, RECORD_BYTES).decode("utf-8"))
    except FileNotFoundError:
        if missing_ok:
            return None
        raise DeployError("{}: no such file ({} is {})".format(path, model.FILE, model.WHAT))
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise DeployError("{}: cannot read {} ({}); {}".format(
            path, model.WHAT, getattr(e, "strerror", None) or e, model.HINT))
    except RecursionError:  # arrays or objects nested thousands deep: no file deploy writes
        raise DeployError("{}: cannot read {} (nested too deeply to be one deploy wrote); {}".format(
            path, model.WHAT, model.HINT)) from None
    try:
        return check(data, kind, path)
    except RecursionError:
        raise DeployError("{}: not {} (nested too deeply to be one deploy wrote); {}".format(
            path, model.WHAT, model.HINT)) from None


def check(data, kind, path):
    """``data`` (a parsed file) if it is what ``kind``'s schema allows, else the one-line DeployError."""
    model = _model(kind)
    if not isinstance(data, dict):
        raise _bad(path, "(the file)", "an object", data, model.HINT)
    _check_schema(data.get(SCHEMA_KEY), model, path)
    error = _first_error(model, data)
    if error is not None:
        raise _bad(path, error[0], error[1], error[2], model.HINT)
    return data


def _first_error(model, data):
    """(key, expected, found) of the first thing ``data`` gets wrong, else None: the model's keys, then (a file
    whose writer writes no NaN) a NaN or infinity under any other key: a reader may show or copy any key."""
    error = _model_error(model, data)
    if error is None and not model.ALLOW_NAN:
        where = _non_finite(data, ())
        if where is not None:
            return _key(where[0]), "a finite number (deploy writes no NaN or Infinity in this file)", where[1]
    return error


def _non_finite(node, loc):
    """(key path, value) of the first NaN or infinity in ``node``, else None."""
    if isinstance(node, float) and not math.isfinite(node):
        return loc, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        found = _non_finite(v, loc + (k,))
        if found is not None:
            return found
    return None


def write(path, data, kind=None):
    """Check ``data`` against its schema (``kind``; else the one its ``schema`` names; else the file
    name's), stamp ``schema`` and write it atomically. Returns what was written. A ``data`` that does not
    pass is deploy's own bug: a DeployError naming the file and key, and nothing is written."""
    from pipeline import files

    if kind is None:
        stamped = _SCHEMA.match(str(data.get(SCHEMA_KEY, ""))) if isinstance(data, dict) else None
        kind = stamped.group(1) if stamped else kind_for(path)
        if kind is None:
            raise ValueError("records.write({}): give the kind ({})".format(path, ", ".join(sorted(MODELS))))
    model = _model(kind)
    if not isinstance(data, dict):
        raise DeployError("{}: deploy was about to write {} that is not an object: a bug in deploy, please report "
                          "it".format(path, type(data).__name__))
    data = dict(data)
    data[SCHEMA_KEY] = schema_of(kind)
    error = _first_error(model, data)
    if error is not None:
        raise DeployError("{}: deploy was about to write {}: expected {}, found {}; nothing was written (a bug in "
                          "deploy, please report it)".format(path, error[0], error[1], _shown(error[2])))
    text = json.dumps(data, indent=2, sort_keys=True, default=str, allow_nan=model.ALLOW_NAN) + "\n"
    files.write_text(path, text)
    return data


def version_of(data, kind):
    """The schema version ``data`` says it has (1 when it says none, as files from before the stamp)."""
    found = _SCHEMA.match(str(data.get(SCHEMA_KEY))) if isinstance(data, dict) and data.get(SCHEMA_KEY) else None
    return int(found.group(2)) if found else 1


# --- errors as one line


def _check_schema(value, model, path):
    if value is None:  # written before deploy stamped its files: version 1 of this kind
        return
    expected = "deploy.{}/<version> (this deploy reads {})".format(
        model.NAME, "version 1" if model.VERSION == 1 else "versions 1 to {}".format(model.VERSION))
    found = _SCHEMA.match(value) if isinstance(value, str) else None
    if found is None:
        raise _bad(path, SCHEMA_KEY, expected, value, model.HINT)
    name, version = found.group(1), int(found.group(2))
    if name != model.NAME:
        other = MODELS[name].WHAT if name in MODELS else "a file deploy does not know"
        raise DeployError("{}: {}: expected {}, found {!r}: this file holds {}, not {}".format(
            path, SCHEMA_KEY, expected, value, other, model.WHAT))
    if version > model.VERSION or version < 1:
        raise DeployError("{}: {}: expected {}, found {!r}: written by a newer deploy; upgrade deploy to read "
                          "it".format(path, SCHEMA_KEY, expected, value) if version > model.VERSION else
                          "{}: {}: expected {}, found {!r}".format(path, SCHEMA_KEY, expected, value))


_PYDANTIC = {"model_type": "an object", "dict_type": "an object", "list_type": "a list",
             "missing": "the key (it is missing)", "string_type": "a string", "bool_type": "true or false"}


def _model_error(model, data):
    """(key, expected, found) of the first key ``data`` gets wrong against ``model``, else None."""
    from pydantic import ValidationError

    try:
        model.model_validate(data)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        expected = err["msg"] if err["type"] == ERROR else _PYDANTIC.get(err["type"], err["msg"])
        found = _MISSING if err["type"] == "missing" else err.get("input")
        return _key(err["loc"]), expected, found
    return None


_MISSING = object()


def _key(loc):
    out = ""
    for part in loc:
        out += "[{}]".format(part) if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "(the file)"


def _shown(value):
    if value is _MISSING:
        return "nothing"
    shown = repr(value)
    if isinstance(value, (list, dict)) and len(value) > 8:
        return "{} ({} {})".format(shown[:60] + "..." if len(shown) > 60 else shown, len(value),
                                   "values" if isinstance(value, list) else "keys")
    return shown if len(shown) < 80 else shown[:77] + "..."


def _bad(path, key, expected, value, hint):
    return DeployError("{}: {}: expected {}, found {}; this is not what deploy writes ({})".format(
        path, key, expected, _shown(value), hint))
