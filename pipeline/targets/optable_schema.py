"""The op table schema: which ops a conversion route handles, one YAML file per table under ``targets/ops/``.

A table is data, not code: ``load_op_table("onnx_trt_8.2")`` reads ``targets/ops/onnx_trt_8.2.yaml``
and schema-checks it into an ``OpTable``. Targets name their tables per route
(``op_tables: {onnx: onnx_trt_8.2, uff: uff_trt8, tftrt: tftrt}``); ``DEPLOY_TARGETS_DIR`` moves
the tables with the targets (``$DEPLOY_TARGETS_DIR/ops/``).

Schema of a table file (every key but ``ops`` describes the table as a whole)::

    name: onnx_trt_8.2            # equals the file name without .yaml
    description: ...
    route: onnx                   # onnx | uff | tftrt | dla
    op_names: onnx                # whose op names the table lists: onnx op types or tensorflow op names
    tensorrt: '8.2'               # the TensorRT version (or major) the table was written for; null: not tied to one
    applies_to: ...               # optional: what the table covers, as the source says
    opset: {min: null, max: 13}   # onnx tables only; min null: the source states no lower bound
    opset_statement: ...          # the source's own words on opsets
    data_types: [DOUBLE, FLOAT32, ...]  # ONNX tensor types the parser accepts, if the source says (DATA_TYPES)
    io_types: [FP32, FP16, INT32, ...]  # onnx tables: types a network input/output may have (the parser's convertDtype)
    cast_down: {INT64: INT32}     # onnx tables: types the parser converts to another (weights and inputs)
    quantized_types: [INT8]       # onnx tables: valid only through QuantizeLinear/DequantizeLinear
    io_only_types: [UINT8]        # onnx tables: valid only as network inputs/outputs
    source_commit: <sha>          # the commit of the source the table is generated from
    precisions: [fp16, int8]      # dla only: the precisions the route runs
    unlisted: unsupported         # an op missing from the table: unsupported, or stays_in_tensorflow (tftrt)
    sources: [...]                # where the facts come from, verbatim
    unconfirmed: [...]            # facts the research did not confirm
    notes: [...]
    facts: {...}                  # route-level facts that are not about one op (plain data, kept verbatim)
    ops:
      Conv: {types: [FP32, FP16], restrictions: [...], const_inputs: {1: W}}
      NonZero: {supported: false}

Per op (``OpSupport``): ``supported`` (default true), ``experimental``, ``unconfirmed`` (why the entry
is not confirmed), ``types`` (TYPES: FP32, FP16, INT32, ...), ``restrictions`` (human-readable), and
structured restatements of
restrictions for checkers: ``const_inputs`` (input index -> name; the input must be an
initializer/constant; -1 is the last input), ``attributes`` (attribute -> allowed values),
``unsupported_attributes``, ``unsupported_outputs``, ``spatial_dims``, ``input_rank``,
``min_tensorrt``, ``min_dla_generation``, ``explicit_batch_only``; then ``maps_to`` (what the
converter emits), ``via`` (per-path status, DLA), ``reason`` and ``evidence`` (why it is unsupported),
``notes``.

Imports only the standard library, PyYAML and pydantic.
"""

import re
from pathlib import Path
from typing import Dict, Iterable, Literal, Optional, Tuple, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)


ROUTES = ("onnx", "uff", "tftrt", "dla")  # dla: the layers TensorRT places on a DLA core
OP_NAMES = ("onnx", "tensorflow")
# Whose op names each route's tables list: a property of the route, not of any device.
ROUTE_OP_NAMES = {"onnx": "onnx", "uff": "tensorflow", "tftrt": "tensorflow", "dla": "onnx"}
UNLISTED = ("unsupported", "stays_in_tensorflow")
# Per-op tensor types (OpSupport.types): the names onnx-tensorrt's operator tables use, for every table.
TYPES = ("FP64", "FP32", "FP16", "BF16", "FP8", "INT64", "INT32", "INT8", "INT4", "UINT8", "BOOL")
# Table-level data_types: the ONNX type names the sources use ("supports the following ONNX data types").
DATA_TYPES = ("DOUBLE", "FLOAT32", "FLOAT16", "BFLOAT16", "FP8", "INT64", "INT32", "INT8", "INT4", "UINT8", "BOOL")
# Any spelling of a type (ONNX, TensorFlow, numpy, TYPES) -> its TYPES name; see normalize_type.
_TYPE_ALIASES = {
    "DOUBLE": "FP64", "FLOAT64": "FP64", "DT_DOUBLE": "FP64",
    "FLOAT": "FP32", "FLOAT32": "FP32", "DT_FLOAT": "FP32",
    "FLOAT16": "FP16", "HALF": "FP16", "DT_HALF": "FP16",
    "BFLOAT16": "BF16", "DT_BFLOAT16": "BF16",
    "FLOAT8E4M3FN": "FP8", "FLOAT8": "FP8",
    "INT64": "INT64", "DT_INT64": "INT64", "INT32": "INT32", "DT_INT32": "INT32",
    "INT8": "INT8", "DT_INT8": "INT8", "UINT8": "UINT8", "DT_UINT8": "UINT8",
    "BOOL": "BOOL", "DT_BOOL": "BOOL",
}
PRECISIONS = ("fp32", "fp16", "int8")
# What happens to one op on a route (OpTable.outcome).
OUTCOMES = ("converts", "unsupported", "stays_in_tensorflow")

_VERSION = r"^\d+(\.\d+)*$"
TABLE_NAME = r"^[a-z0-9][a-z0-9_.]*$"
_OP_NAME = re.compile(r"^_?[A-Za-z][A-Za-z0-9_]*$")

DataType = Literal[TYPES]


def normalize_type(name: str) -> Optional[str]:
    """The TYPES name of a tensor type written any common way ('float32', 'FLOAT', 'DT_HALF', 'FP16');
    None when it has none (e.g. 'string')."""
    key = str(name).strip().upper()
    return key if key in TYPES else _TYPE_ALIASES.get(key)


def _not_a_number(value, what):
    # YAML reads 8.2 as a float and 10.10 as 10.1: versions must be quoted strings.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"write the version as a quoted string, {what}: '{value}'")
    return value


def _unique(value):
    seen = [v for i, v in enumerate(value) if v in value[:i]]
    if seen:
        raise ValueError(f"{seen[0]!r} is listed twice")
    return value


class RankRange(BaseModel):
    """Allowed input rank, inclusive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: int = Field(ge=0)
    max: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self):
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class OpsetRange(BaseModel):
    """ONNX opsets the parser reads, inclusive; min None: the source states no lower bound."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: Optional[int] = Field(default=None, ge=1)
    max: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self):
        if self.min is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class OpSupport(BaseModel):
    """What one table says about one op."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    supported: bool = True
    experimental: bool = False  # the source marks the support experimental
    unconfirmed: Optional[str] = None  # why this entry is not confirmed; None: as the source says
    types: Optional[Tuple[DataType, ...]] = Field(default=None, min_length=1)  # None: the source lists none
    restrictions: Tuple[str, ...] = ()  # human-readable, from the source
    # Structured restatements of restrictions, for checkers; each applies when the node has that input/attribute.
    const_inputs: Dict[int, str] = Field(default_factory=dict)  # input index -> name: must be an initializer/constant
    attributes: Dict[str, Tuple[Union[StrictInt, StrictStr], ...]] = Field(default_factory=dict)  # allowed values
    unsupported_attributes: Tuple[str, ...] = ()
    unsupported_outputs: Tuple[str, ...] = ()
    spatial_dims: Tuple[int, ...] = ()  # e.g. (2, 3): 2D or 3D only
    input_rank: Optional[RankRange] = None
    padded_output: Optional[str] = None  # the parser pads the op's data-dependent output to this fixed shape
    min_tensorrt: Optional[str] = Field(default=None, pattern=_VERSION)  # converted only from this TensorRT on
    min_dla_generation: Optional[int] = Field(default=None, ge=1)  # runs on the DLA only from this generation on
    explicit_batch_only: bool = False  # converted only in explicit-batch mode
    maps_to: Optional[str] = None  # what the converter emits (UFF op)
    via: Dict[str, str] = Field(default_factory=dict)  # path -> the source's status word (DLA: tensorrt, dla_sw)
    reason: Optional[str] = None  # why the op is unsupported
    evidence: Tuple[str, ...] = ()  # reports backing the entry
    notes: Tuple[str, ...] = ()

    @field_validator("min_tensorrt", mode="before")
    @classmethod
    def _version_is_quoted(cls, value):
        return _not_a_number(value, "min_tensorrt")

    @field_validator("types", "unsupported_attributes", "unsupported_outputs", "spatial_dims")
    @classmethod
    def _no_duplicates(cls, value):
        return value if value is None else _unique(value)

    @field_validator("restrictions", "notes", "evidence")
    @classmethod
    def _no_empty_text(cls, value):
        if any(not v.strip() for v in value):
            raise ValueError("an entry is empty")
        return value

    @model_validator(mode="after")
    def _consistent(self):
        if not self.supported:
            if self.experimental:
                raise ValueError("experimental is set on an unsupported op")
        elif self.reason is not None:
            raise ValueError("reason says why an op is unsupported; on a supported op write restrictions or notes")
        return self


class OpTable(BaseModel):
    """One op table: which ops one conversion route handles, for one TensorRT version (or family)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=TABLE_NAME)  # equals the file name without .yaml
    description: str
    route: Literal[ROUTES]
    op_names: Literal[OP_NAMES]
    tensorrt: Optional[str] = Field(default=None, pattern=_VERSION)
    applies_to: Optional[str] = None
    opset: Optional[OpsetRange] = None  # onnx tables only
    opset_statement: Optional[str] = None
    data_types: Optional[Tuple[Literal[DATA_TYPES], ...]] = Field(default=None, min_length=1)
    # Tensor-type facts from the parser source (onnx tables; None: the table does not say).
    io_types: Optional[Tuple[DataType, ...]] = None  # a network input/output may have these types
    cast_down: Dict[DataType, DataType] = Field(default_factory=dict)  # the parser converts key to value
    quantized_types: Tuple[DataType, ...] = ()  # valid only through QuantizeLinear/DequantizeLinear
    io_only_types: Tuple[DataType, ...] = ()  # valid only as network inputs/outputs
    source_commit: Optional[str] = Field(default=None, pattern=r"^[0-9a-f]{7,40}$")
    precisions: Optional[Tuple[Literal[PRECISIONS], ...]] = Field(default=None, min_length=1)
    unlisted: Literal[UNLISTED]
    sources: Tuple[str, ...] = Field(min_length=1)
    unconfirmed: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()
    facts: Dict[str, JsonValue] = Field(default_factory=dict)
    ops: Dict[str, OpSupport] = Field(min_length=1)

    _path: Optional[Path] = PrivateAttr(default=None)

    @field_validator("tensorrt", mode="before")
    @classmethod
    def _version_is_quoted(cls, value):
        return _not_a_number(value, "tensorrt")

    @field_validator("data_types", "precisions", "io_types", "quantized_types", "io_only_types")
    @classmethod
    def _no_duplicates(cls, value):
        return value if value is None else _unique(value)

    @field_validator("ops")
    @classmethod
    def _op_names(cls, value):
        bad = [k for k in value if not _OP_NAME.match(k)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an op name (letters, digits, '_')")
        return value

    @model_validator(mode="after")
    def _consistent(self):
        expected = ROUTE_OP_NAMES[self.route]
        if self.op_names != expected:
            raise ValueError(f"route {self.route!r} tables list {expected} op names; set op_names: {expected}")
        if self.unlisted == "stays_in_tensorflow" and self.route != "tftrt":
            raise ValueError(f"unlisted: stays_in_tensorflow is TF-TRT's fallback; route {self.route!r} has none")
        if self.route == "onnx" and self.opset is None:
            raise ValueError("an onnx table needs opset: {min: ..., max: ...}")
        if self.route != "onnx" and self.opset is not None:
            raise ValueError(f"opset is for onnx tables; this table's route is {self.route!r}")
        typed = self.io_types is not None or self.cast_down or self.quantized_types or self.io_only_types
        if typed and self.route != "onnx":
            raise ValueError("io_types, cast_down, quantized_types and io_only_types are for onnx tables")
        if self.precisions is not None and self.route != "dla":
            raise ValueError("precisions is for dla tables; the other routes take the target's precisions")
        return self

    # -- lookups ----------------------------------------------------------------------------------

    @property
    def path(self) -> Optional[Path]:
        """The file this table was loaded from."""
        return self._path

    @property
    def supported_ops(self) -> Tuple[str, ...]:
        """Listed ops marked supported, sorted."""
        return tuple(sorted(k for k, v in self.ops.items() if v.supported))

    @property
    def unsupported_ops(self) -> Tuple[str, ...]:
        """Listed ops marked unsupported, sorted (unlisted ops are not here)."""
        return tuple(sorted(k for k, v in self.ops.items() if not v.supported))

    def lookup(self, op: str) -> Optional[OpSupport]:
        """The table's entry for ``op`` (exact, case-sensitive name); None: not listed."""
        return self.ops.get(op)

    def is_supported(self, op: str, tensorrt=None, dla_generation: Optional[int] = None) -> bool:
        """True if the route converts ``op`` (to TensorRT layers; for dla: runs it on the DLA).

        An op the table does not list takes ``unlisted``'s meaning: False either way; ``outcome``
        tells a failure ('unsupported') from TF-TRT leaving the op to TensorFlow. ``tensorrt``
        ("8.2.1" or (8, 2, 1)) and ``dla_generation`` apply the entry's min_tensorrt /
        min_dla_generation; left None, those gates are not checked.
        """
        return self.explain(op, tensorrt, dla_generation) is None

    def outcome(self, op: str, tensorrt=None, dla_generation: Optional[int] = None) -> str:
        """'converts'; else what not converting means on this route: 'unsupported' (the route fails
        on it, or for dla: it leaves the DLA) or 'stays_in_tensorflow' (TF-TRT runs it in TensorFlow)."""
        if self.is_supported(op, tensorrt, dla_generation):
            return "converts"
        return "stays_in_tensorflow" if self.unlisted == "stays_in_tensorflow" else "unsupported"

    def explain(self, op: str, tensorrt=None, dla_generation: Optional[int] = None) -> Optional[str]:
        """Why the route does not convert ``op``, one line; None when it converts."""
        entry = self.ops.get(op)
        if entry is None:
            return f"{op} is not in op table {self.name}"
        if not entry.supported:
            return entry.reason or f"op table {self.name} marks {op} unsupported"
        if entry.min_tensorrt and tensorrt is not None and _version_tuple(tensorrt) < _version_tuple(entry.min_tensorrt):
            return f"{op} needs TensorRT >= {entry.min_tensorrt} (op table {self.name})"
        if entry.min_dla_generation and dla_generation is not None and dla_generation < entry.min_dla_generation:
            return f"{op} needs DLA generation >= {entry.min_dla_generation} (op table {self.name})"
        return None

    def not_converted(self, ops: Iterable[str], tensorrt=None, dla_generation: Optional[int] = None) -> Dict[str, str]:
        """The ops among ``ops`` the route does not convert, each with ``explain``'s reason (first-seen order)."""
        found = {}
        for op in ops:
            if op not in found:
                why = self.explain(op, tensorrt, dla_generation)
                if why is not None:
                    found[op] = why
        return found

    def supported_types(self, op: str) -> Optional[Tuple[str, ...]]:
        """Types the table lists for a supported ``op``; () when the op is unsupported or unlisted;
        None when the op is supported but the source names no types."""
        entry = self.ops.get(op)
        if entry is None or not entry.supported:
            return ()
        return entry.types

    def supports_type(self, op: str, dtype: str) -> Optional[bool]:
        """Whether the table lists ``dtype`` (any spelling, see normalize_type) for ``op``; None when
        the op is supported but the source names no types; False when the op is not supported."""
        types = self.supported_types(op)
        if types is None:
            return None
        return normalize_type(dtype) in types

    def restrictions(self, op: str) -> Tuple[str, ...]:
        entry = self.ops.get(op)
        return entry.restrictions if entry is not None else ()

    def const_inputs(self, op: str) -> Dict[int, str]:
        """Input index -> name of the inputs of ``op`` that must be initializers/constants."""
        entry = self.ops.get(op)
        return dict(entry.const_inputs) if entry is not None else {}

    def supports_opset(self, opset: int) -> bool:
        """True if the table's opset range holds ``opset`` (always True for a table without one)."""
        if self.opset is None:
            return True
        return opset <= self.opset.max and (self.opset.min is None or opset >= self.opset.min)

    def is_unconfirmed(self, op: str) -> bool:
        entry = self.ops.get(op)
        return entry is not None and entry.unconfirmed is not None


def _version_tuple(version) -> Tuple[int, ...]:
    if isinstance(version, tuple):
        return version
    return tuple(int(p) for p in str(version).split("."))
