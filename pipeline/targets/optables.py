"""Op tables: which ops a conversion route handles, one YAML file per table under ``targets/ops/``.

    load_op_table("onnx_trt_8.2")   # targets/ops/onnx_trt_8.2.yaml, schema-checked into an OpTable; cached
    list_op_tables(), all_op_tables()

The schema (what a table file holds, per table and per op) is ``pipeline.targets.optable_schema``;
``DEPLOY_TARGETS_DIR`` moves the tables with the targets (``$DEPLOY_TARGETS_DIR/ops/``).
"""

import difflib
import re
from pathlib import Path

from pydantic import ValidationError

from pipeline.errors import DeployError
from pipeline.targets.files import display as _display, load_cached, op_tables_dir, read_yaml, validation_message
from pipeline.targets.optable_schema import (  # noqa: F401  (ROUTES ... normalize_type: the schema's names, re-exported)
    DATA_TYPES, OP_NAMES, OUTCOMES, PRECISIONS, ROUTE_OP_NAMES, ROUTES, TABLE_NAME, TYPES, UNLISTED, OpsetRange,
    OpSupport, OpTable, RankRange, normalize_type,
)


class UnknownOpTable(DeployError):
    """No table file by that name (targets.py re-words it with the target file and key)."""


# A table file has a top-level 'route:' key; other data files share the directory (e.g. the
# checker's op_families.yaml and tensorflow_ops.yaml) and are not tables.
_IS_TABLE = re.compile(rb"^route:", re.M)


def _is_table_file(path: Path) -> bool:
    try:
        return bool(_IS_TABLE.search(path.read_bytes()))
    except OSError:
        return False


def list_op_tables() -> list:
    """Names of the op tables in the op-tables directory, sorted (files with a top-level 'route:' key)."""
    directory = op_tables_dir()
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.yaml") if not p.name.startswith(".") and _is_table_file(p))


def load_op_table(name: str) -> OpTable:
    """The validated op table called ``name`` (``<targets dir>/ops/<name>.yaml``); cached."""
    name = str(name)
    path = op_tables_dir() / f"{name}.yaml"
    if not re.match(TABLE_NAME, name) or not path.is_file():
        raise UnknownOpTable(_unknown_table_message(name))
    return load_cached(path, parse_op_table)


def all_op_tables() -> list:
    """Every table in the op-tables directory, loaded and validated."""
    return [load_op_table(name) for name in list_op_tables()]


def _unknown_table_message(name, why=""):
    known = list_op_tables()
    where = _display(op_tables_dir())
    if not known:
        return f"unknown op table '{name}': {why}no op tables in {where}; add {where}/{name}.yaml"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown op table '{name}': {why}{hint}known tables: {', '.join(known)} (a table is a file, {where}/<name>.yaml)"


def parse_op_table(path):
    """Parse and validate one table file (load_op_table caches it per path, mtime and size)."""
    path = Path(path)
    shown = _display(path)
    data = read_yaml(path, "op table", shown)
    if not isinstance(data, dict):
        raise DeployError(f"{shown}: an op table must be a YAML mapping of keys (name, route, ops, ...), got {type(data).__name__}")
    if "route" not in data:  # another data file in the directory (list_op_tables skips these too)
        raise UnknownOpTable(_unknown_table_message(path.stem, f"{shown} is not an op table (no top-level 'route:' key); "))
    try:
        table = OpTable.model_validate(data)
    except ValidationError as exc:
        raise DeployError(f"{shown}: {validation_message(exc, lambda loc, is_key: _model_at(loc).model_fields)}") from None
    if table.name != path.stem:
        raise DeployError(f"{shown}: key 'name' is '{table.name}' but the file is {path.name}; make them match")
    table._path = path
    return table


# The model a key path lands in, for "unknown key; allowed keys: ..." messages.
_NESTED = {"opset": OpsetRange, "input_rank": RankRange}


def _model_at(loc):
    model = OpTable
    parts = list(loc[:-1])
    if parts[:1] == ["ops"] and len(parts) >= 2:
        model, parts = OpSupport, parts[2:]
    for part in parts:
        model = _NESTED.get(part, model)
    return model
