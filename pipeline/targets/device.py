"""Targets: one YAML file per device under ``targets/``, schema-checked into a ``Target``.

A device is data, not code: adding one is adding ``targets/<name>.yaml``; nothing here names a
device. ``load_target("jetson_tx2")`` reads ``targets/jetson_tx2.yaml``; a path to a .yaml file
works too, and ``DEPLOY_TARGETS_DIR`` points deploy at another directory of target files.

A target names the op table of each route it has (``op_tables: {onnx: onnx_trt_8.2, uff: uff_trt8,
tftrt: tftrt}``, plus ``dla: dla`` on targets with DLA cores); ``load_target`` checks that every
named table exists in ``<targets dir>/ops/`` (pipeline/targets/optables.py) and is for that route.

Imports only the standard library, PyYAML and pydantic.
"""

import difflib
import os
import re
from pathlib import Path
from typing import Dict, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from pipeline.targets.estimate_facts import EstimateFacts
from pipeline.targets.files import display as _display, load_cached, read_yaml, targets_dir, validation_message
from pipeline.errors import DeployError
from pipeline.targets.routes import ROUTES, RUNNABLE_ROUTES


PRECISIONS = ("fp32", "fp16", "int8")
# Keys of op_tables: the routes, and dla (the layers TensorRT places on DLA cores).
OP_TABLE_KEYS = ROUTES + ("dla",)
RUNTIMES = ("tensorrt", "onnxruntime")

# NvUffParser.h is in TensorRT release/8.2, 8.5, 8.6 and absent from release/9.0 on
# (the targets' [uff_headers] source). A consistency check on the data, not a device fact.
LAST_TENSORRT_MAJOR_WITH_UFF = 8

_VERSION = re.compile(r"^\d+(\.\d+)*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_TABLE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.]*$")  # an op table's name (pipeline/targets/optables.py)
_VERSION_FIELDS = ("jetpack", "l4t", "tensorrt", "cuda", "cudnn", "python", "compute_capability")

Precision = Literal[PRECISIONS]
Route = Literal[ROUTES]
OpTableKey = Literal[OP_TABLE_KEYS]


class OnnxSupport(BaseModel):
    """What the target's ONNX consumer (TensorRT's ONNX parser, or ONNX Runtime) accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_opset: int = Field(ge=1)
    # None: the source states no lower bound (the onnx-tensorrt 8.x tables give only "up to Opset N").
    min_opset: Optional[int] = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _opset_range(self):
        if self.min_opset is not None and self.min_opset > self.max_opset:
            raise ValueError(f"onnx.min_opset {self.min_opset} is above onnx.max_opset {self.max_opset}")
        return self


class Target(BaseModel):
    """One device deploy can build for (or the host fallback), as written in targets/<name>.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME.pattern)  # equals the file name without .yaml
    description: str
    family: str  # the modules this file covers, e.g. "TX2 series (TX2, TX2 4GB, TX2i, TX2 NX)"
    runtime: Literal[RUNTIMES]  # what runs the model on the target
    jetpack: Optional[str] = None  # the JetPack release this file pins, e.g. "4.6.6"
    l4t: Optional[str] = None
    tensorrt: Optional[str] = None  # e.g. "8.2.1"; None when runtime is not tensorrt
    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    python: Optional[str] = None  # the device's Python, e.g. "3.6"; None: the Python running deploy
    compute_capability: Optional[str] = None  # e.g. "6.2"
    gpu_arch: Optional[str] = None  # e.g. "Pascal"
    precisions: Tuple[Precision, ...] = Field(min_length=1)  # fast precisions (platformHasFastFp16/Int8)
    dla_cores: int = Field(default=0, ge=0)  # most DLA cores on any module of the family
    dla_generation: Optional[int] = Field(default=None, ge=1)
    memory: Tuple[str, ...] = ()  # module variants and their RAM
    routes: Tuple[Route, ...] = Field(min_length=1)  # conversion routes the target's stack has
    onnx: OnnxSupport
    # Route (or dla) -> name of its op table in <targets dir>/ops/, e.g. {onnx: onnx_trt_8.2}.
    # Every route of a TensorRT target has one; dla iff dla_cores > 0; {} for ONNX Runtime (no TensorRT tables).
    op_tables: Dict[OpTableKey, str] = Field(default_factory=dict)
    tensorflow: Tuple[str, ...] = ()  # NVIDIA TensorFlow builds for this JetPack (the tftrt route runs on them)
    unconfirmed: Tuple[str, ...] = ()  # fields whose values the research did not confirm ("op_tables.onnx" for nested)
    notes: Tuple[str, ...] = ()
    sources: Dict[str, Tuple[str, ...]] = Field(default_factory=dict)  # field or topic -> sources
    estimate: Optional[EstimateFacts] = None  # GPU peaks and bandwidth for deploy estimate (estimate_facts.py)

    _path: Optional[Path] = PrivateAttr(default=None)

    @field_validator(*_VERSION_FIELDS, mode="before")
    @classmethod
    def _version_is_quoted(cls, value, info):
        # YAML reads 10.2 as a float and 10.10 as 10.1: versions must be quoted strings.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"write the version as a quoted string, {info.field_name}: '{value}'")
        return value

    @field_validator(*_VERSION_FIELDS)
    @classmethod
    def _version_shape(cls, value):
        if value is not None and not _VERSION.match(value):
            raise ValueError(f"expected a version like '8.2.1', got {value!r}")
        return value

    @field_validator("precisions", "routes", "unconfirmed")
    @classmethod
    def _no_duplicates(cls, value):
        seen = [v for i, v in enumerate(value) if v in value[:i]]
        if seen:
            raise ValueError(f"{seen[0]!r} is listed twice")
        return value

    @field_validator("unconfirmed")
    @classmethod
    def _unconfirmed_names_fields(cls, value):
        for entry in value:
            head, _, rest = entry.partition(".")
            nested = {"onnx": OnnxSupport.model_fields, "op_tables": OP_TABLE_KEYS}
            known = head in cls.model_fields and (not rest or rest in nested.get(head, ()))
            if not known:
                raise ValueError(f"{entry!r} names no field of a target (e.g. 'tensorrt', 'op_tables.onnx')")
        return value

    @field_validator("op_tables")
    @classmethod
    def _table_names(cls, value):
        for key, name in value.items():
            if not _TABLE_NAME.match(name):
                raise ValueError(f"op_tables.{key}: {name!r} is not a table name (e.g. 'onnx_trt_8.2')")
        return value

    @field_validator("sources")
    @classmethod
    def _sources_not_empty(cls, value):
        for topic, items in value.items():
            if not items:
                raise ValueError(f"sources[{topic!r}] lists no source")
        return value

    @model_validator(mode="after")
    def _consistent(self):
        if self.runtime == "tensorrt":
            missing = [f for f in ("jetpack", "tensorrt", "cuda", "compute_capability") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"runtime 'tensorrt' needs {', '.join(missing)}")
            no_table = [r for r in self.routes if r not in self.op_tables]
            if no_table:
                raise ValueError(
                    f"op_tables has no table for route {', '.join(no_table)}; name one, e.g. op_tables: {{{no_table[0]}: <table>}}"
                )
            if self.dla_cores > 0 and "dla" not in self.op_tables:
                raise ValueError(f"dla_cores is {self.dla_cores} but op_tables has no dla table; add op_tables.dla")
        else:
            if self.tensorrt is not None:
                raise ValueError(f"tensorrt is set but runtime is {self.runtime!r}; set runtime: tensorrt or drop tensorrt")
            trt_only = [r for r in self.routes if r != "onnx"]
            if trt_only:
                raise ValueError(f"routes {trt_only} need TensorRT but runtime is {self.runtime!r}")
        if "uff" in self.routes and self.trt_version and self.trt_version[0] > LAST_TENSORRT_MAJOR_WITH_UFF:
            raise ValueError(f"routes lists uff but TensorRT {self.tensorrt} has no UFF parser (removed in TensorRT 9)")
        if self.dla_generation is not None and self.dla_cores == 0:
            raise ValueError("dla_generation is set but dla_cores is 0")
        stray = [k for k in self.op_tables if k != "dla" and k not in self.routes]
        if stray:
            raise ValueError(f"op_tables.{stray[0]} is set but routes has no {stray[0]}; drop it or add the route")
        if "dla" in self.op_tables and self.dla_cores == 0:
            raise ValueError("op_tables.dla is set but dla_cores is 0; drop it")
        return self

    # -- helpers ---------------------------------------------------------------------------------

    @property
    def has_tensorrt(self) -> bool:
        return self.runtime == "tensorrt"

    @property
    def max_opset(self) -> int:
        return self.onnx.max_opset

    @property
    def min_opset(self) -> Optional[int]:
        return self.onnx.min_opset

    @property
    def op_table(self) -> Optional[str]:
        """The onnx route's op table name (same as ``op_table_for("onnx")``)."""
        return self.op_tables.get("onnx")

    def op_table_for(self, route: str) -> Optional[str]:
        """The name of the op table for ``route`` (uff, onnx, tftrt, dla); None: the target has none."""
        return self.op_tables.get(route.lower())

    @property
    def trt_version(self) -> Optional[Tuple[int, ...]]:
        """TensorRT version as a tuple of ints, e.g. (8, 2, 1); None without TensorRT."""
        return tuple(int(p) for p in self.tensorrt.split(".")) if self.tensorrt else None

    @property
    def path(self) -> Optional[Path]:
        """The file this target was loaded from."""
        return self._path

    def supports_precision(self, precision: str) -> bool:
        return precision.lower() in self.precisions

    def supports_route(self, route: str) -> bool:
        return route.lower() in self.routes

    def supports_opset(self, opset: int) -> bool:
        return opset <= self.max_opset and (self.min_opset is None or opset >= self.min_opset)

    def is_unconfirmed(self, field: str) -> bool:
        return field in self.unconfirmed


# -- loading ---------------------------------------------------------------------------------------


def list_targets() -> list:
    """Names of the targets in the targets directory, sorted."""
    directory = targets_dir()
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.yaml") if not p.name.startswith("."))


def load_target(name) -> Target:
    """The validated target called ``name`` (or the target file at path ``name``)."""
    name = str(name)
    if name.endswith((".yaml", ".yml")) or os.sep in name or (os.altsep and os.altsep in name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise DeployError(f"target file {name}: not found; give a path to a target .yaml file or a target name")
    else:
        path = targets_dir() / f"{name}.yaml"
        if not path.is_file():
            raise DeployError(_unknown_target_message(name))
    target = load_cached(path, _parse_target)
    _check_op_tables(target)
    return target


def all_targets() -> list:
    """Every target in the targets directory, loaded and validated."""
    return [load_target(name) for name in list_targets()]


def _check_op_tables(target):
    """Every table the target names exists in <targets dir>/ops/, is for its route, and agrees with the target.

    Runs outside the cached file load: pipeline/targets/optables.py caches tables (per path, mtime, size), so
    this costs a few dict lookups once they are loaded, and an edited table is checked again.
    """
    from pipeline.targets.optables import UnknownOpTable, load_op_table

    shown = _display(target.path) if target.path else target.name
    for key, name in target.op_tables.items():
        where = f"{shown}: key 'op_tables.{key}'"
        try:
            table = load_op_table(name)
        except UnknownOpTable as exc:
            raise DeployError(f"{where}: {exc.message}") from None
        if table.route != key:
            raise DeployError(f"{where}: op table '{name}' is for route '{table.route}', not '{key}'; name a {key} table")
        if table.tensorrt and target.trt_version and int(table.tensorrt.split(".")[0]) != target.trt_version[0]:
            raise DeployError(
                f"{where}: op table '{name}' is for TensorRT {table.tensorrt}, the target has TensorRT {target.tensorrt}; "
                "name a table for its TensorRT major version"
            )
        if key == "onnx" and table.opset is not None:
            if target.max_opset > table.opset.max:
                raise DeployError(
                    f"{shown}: key 'onnx.max_opset' is {target.max_opset} but op table '{name}' parses up to opset "
                    f"{table.opset.max}; lower it or name another table"
                )
            if table.opset.min is not None and (target.min_opset is None or target.min_opset < table.opset.min):
                raise DeployError(
                    f"{shown}: key 'onnx.min_opset' is {target.min_opset} but op table '{name}' parses from opset "
                    f"{table.opset.min}; set onnx.min_opset: {table.opset.min} or higher"
                )


def _unknown_target_message(name):
    known = list_targets()
    where = _display(targets_dir())
    if not known:
        return f"unknown target '{name}': no target files in {where}; add {where}/{name}.yaml"
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.4)
    containing = [k for k in known if name.lower() in k]
    suggestion = close[0] if close else (containing[0] if containing else None)
    hint = f"did you mean '{suggestion}'? " if suggestion else ""
    return (
        f"unknown target '{name}': {hint}known targets: {', '.join(known)} "
        f"(a new device is a new file, {where}/{name}.yaml)"
    )


def _parse_target(path):
    """Parse and validate one target file (load_target caches it per path, mtime and size)."""
    shown = _display(path)
    data = read_yaml(path, "target file", shown)
    if not isinstance(data, dict):
        raise DeployError(f"{shown}: a target file must be a YAML mapping of keys (name, tensorrt, ...), got {type(data).__name__}")
    try:
        target = Target.model_validate(data)
    except ValidationError as exc:
        raise DeployError(f"{shown}: {validation_message(exc, _allowed_keys)}") from None
    if target.name != path.stem:
        raise DeployError(f"{shown}: key 'name' is '{target.name}' but the file is {path.name}; make them match")
    target._path = path
    return target


def _allowed_keys(loc, is_key):
    if is_key:  # a dict key itself is wrong (op_tables: {foo: ...})
        return OP_TABLE_KEYS
    return OnnxSupport.model_fields if loc[:1] == ["onnx"] else Target.model_fields





# -- human-readable output (for `deploy targets`) --------------------------------------------------


def _or_dash(value):
    return "-" if value is None or value == () or value == "" else str(value)


def describe_target(t: Target) -> str:
    """A multi-line description of one target."""
    star = lambda field: " (unconfirmed)" if t.is_unconfirmed(field) else ""  # noqa: E731
    if t.has_tensorrt:
        runtime = f"TensorRT {t.tensorrt}{star('tensorrt')}"
    else:
        runtime = t.runtime
    opsets = f"{t.min_opset}-{t.max_opset}" if t.min_opset is not None else f"up to {t.max_opset}"
    tables = ", ".join(f"{key}: {name}{star('op_tables.' + key)}" for key, name in t.op_tables.items())
    rows = [
        ("family", t.family),
        ("runtime", runtime),
        ("JetPack / L4T", f"{_or_dash(t.jetpack)} / {_or_dash(t.l4t)}" if t.jetpack or t.l4t else "-"),
        ("CUDA / cuDNN", f"{_or_dash(t.cuda)}{star('cuda')} / {_or_dash(t.cudnn)}{star('cudnn')}" if t.cuda or t.cudnn else "-"),
        ("Python", _or_dash(t.python)),
        ("GPU", f"{t.gpu_arch}, compute capability {t.compute_capability}" if t.gpu_arch else _or_dash(t.compute_capability)),
        ("precisions", ", ".join(t.precisions)),
        ("DLA cores", f"{t.dla_cores}{star('dla_cores')}"),
        ("routes", ", ".join(t.routes)),
        ("ONNX opsets", opsets),
        ("op tables", tables or "-"),
        ("TensorFlow", (", ".join(t.tensorflow) + star("tensorflow")) if t.tensorflow else "-"),
        ("unconfirmed", ", ".join(t.unconfirmed) if t.unconfirmed else "-"),
        ("file", _display(t.path) if t.path else "-"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{t.name}: {t.description}"]
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    if t.memory:
        lines.append("  memory:")
        lines += [f"    - {m}" for m in t.memory]
    if t.notes:
        lines.append("  notes:")
        lines += [f"    - {n}" for n in t.notes]
    if t.sources:
        lines.append("  sources:")
        for topic, items in t.sources.items():
            lines.append(f"    {topic}:")
            lines += [f"      - {s}" for s in items]
    return "\n".join(lines)


def format_target_list(targets) -> str:
    """A table of targets: name, JetPack, TensorRT, CUDA, Python, precisions, routes, max opset."""
    header = ("name", "JetPack", "TensorRT", "CUDA", "Python", "precisions", "routes", "max opset")
    rows = [
        (
            t.name,
            _or_dash(t.jetpack),
            _or_dash(t.tensorrt) if t.has_tensorrt else f"- ({t.runtime})",
            _or_dash(t.cuda),
            _or_dash(t.python),
            ",".join(t.precisions),
            ",".join(t.routes),
            str(t.max_opset),
        )
        for t in targets
    ]
    if not rows:
        return "no targets"
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in rows])
