"""Targets: one YAML file per device under ``targets/``, schema-checked into a ``Target``.

A device is data, not code: adding one is adding ``targets/<name>.yaml``; nothing here names a
device. ``load_target("jetson_tx2")`` reads ``targets/jetson_tx2.yaml``; a path to a .yaml file
works too, and ``DEPLOY_TARGETS_DIR`` points deploy at another directory of target files.

Imports only the standard library, PyYAML and pydantic.
"""

import difflib
import functools
import os
import re
from pathlib import Path
from typing import Dict, Literal, Optional, Tuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from pipeline.errors import DeployError

# The repo's targets/ directory; DEPLOY_TARGETS_DIR overrides it at call time.
TARGETS_DIR = Path(__file__).resolve().parent.parent / "targets"
TARGETS_DIR_ENV = "DEPLOY_TARGETS_DIR"

PRECISIONS = ("fp32", "fp16", "int8")
ROUTES = ("uff", "onnx", "tftrt")  # UFF parser, ONNX parser, TF-TRT
RUNTIMES = ("tensorrt", "onnxruntime")

# NvUffParser.h is in TensorRT release/8.2, 8.5, 8.6 and absent from release/9.0 on
# (platforms.yaml source_index: uff_headers). A consistency check on the data, not a device fact.
LAST_TENSORRT_MAJOR_WITH_UFF = 8

_VERSION = re.compile(r"^\d+(\.\d+)*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_VERSION_FIELDS = ("jetpack", "l4t", "tensorrt", "cuda", "cudnn", "python", "compute_capability")

Precision = Literal[PRECISIONS]
Route = Literal[ROUTES]


class OnnxSupport(BaseModel):
    """What the target's ONNX consumer (TensorRT's ONNX parser, or ONNX Runtime) accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_opset: int = Field(ge=1)
    # None: the source states no lower bound (the onnx-tensorrt 8.x tables give only "up to Opset N").
    min_opset: Optional[int] = Field(default=None, ge=1)
    # Name of the op table a later check loads (e.g. "onnx_trt_ops_8.2"); None: no table (ONNX Runtime).
    op_table: Optional[str] = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")

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
    tensorflow: Tuple[str, ...] = ()  # NVIDIA TensorFlow builds for this JetPack (the tftrt route runs on them)
    unconfirmed: Tuple[str, ...] = ()  # fields whose values the research did not confirm ("onnx.op_table" for nested)
    notes: Tuple[str, ...] = ()
    sources: Dict[str, Tuple[str, ...]] = Field(default_factory=dict)  # field or topic -> sources

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
            known = head in cls.model_fields and (not rest or (head == "onnx" and rest in OnnxSupport.model_fields))
            if not known:
                raise ValueError(f"{entry!r} names no field of a target (e.g. 'tensorrt', 'onnx.op_table')")
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
            if self.onnx.op_table is None:
                raise ValueError("runtime 'tensorrt' needs onnx.op_table (the ONNX parser's op table name)")
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
        return self.onnx.op_table

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


def targets_dir() -> Path:
    """The directory of target files: $DEPLOY_TARGETS_DIR if set, else the repo's targets/."""
    override = os.environ.get(TARGETS_DIR_ENV)
    if not override:
        return TARGETS_DIR
    path = Path(override).expanduser()
    if not path.is_dir():
        raise DeployError(f"{TARGETS_DIR_ENV}={override}: no such directory; point it at a directory of target .yaml files or unset it")
    return path


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
    path = path.resolve()
    stat = path.stat()
    return _load_file(str(path), stat.st_mtime_ns, stat.st_size)


def all_targets() -> list:
    """Every target in the targets directory, loaded and validated."""
    return [load_target(name) for name in list_targets()]


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


@functools.lru_cache(maxsize=None)
def _load_file(path_str, mtime_ns, size):
    """Parse and validate one target file; cached per (path, mtime, size)."""
    path = Path(path_str)
    shown = _display(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise DeployError(f"{shown}:{where}: invalid YAML: {exc.problem}; fix the file") from None
    except yaml.YAMLError as exc:
        raise DeployError(f"{shown}: invalid YAML: {exc}; fix the file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeployError(f"{shown}: cannot read target file: {exc}") from None
    if not isinstance(data, dict):
        raise DeployError(f"{shown}: a target file must be a YAML mapping of keys (name, tensorrt, ...), got {type(data).__name__}")
    try:
        target = Target.model_validate(data)
    except ValidationError as exc:
        raise DeployError(f"{shown}: {_format_validation_error(exc)}") from None
    if target.name != path.stem:
        raise DeployError(f"{shown}: key 'name' is '{target.name}' but the file is {path.name}; make them match")
    target._path = path
    return target


def _format_validation_error(exc):
    """All of pydantic's errors on one line, each as: key 'a.b': what is wrong."""
    problems = []
    for err in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        kind, msg = err["type"], err["msg"]
        if kind == "extra_forbidden":
            allowed = OnnxSupport.model_fields if loc.startswith("onnx.") else Target.model_fields
            msg = f"unknown key; allowed keys: {', '.join(allowed)}"
        elif kind == "missing":
            msg = "required key is missing"
        elif kind == "value_error":
            msg = msg.removeprefix("Value error, ")
        elif kind == "tuple_type":  # tuples hold YAML lists
            msg = f"Input should be a list (got {err['input']!r})"
        else:
            msg = f"{msg} (got {err['input']!r})"
        problems.append(f"key '{loc}': {msg}" if loc else msg)
    return "; ".join(problems)


def _display(path):
    """A path as the user would type it: relative to the working directory when inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key written twice in one mapping (PyYAML keeps the last silently)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key '{key}' appears twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


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
    table = f", op table {t.op_table}{star('onnx.op_table')}" if t.op_table else ""
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
        ("ONNX opsets", f"{opsets}{table}"),
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
