"""What tf2onnx does with each TensorFlow op: ``targets/ops/tf2onnx.json``, read without TensorFlow.

The table is measured, not written: ``python scripts/gen_tf2onnx_table.py`` reads tf2onnx's handler
registry and converts a tiny graph per TF op at several opsets (see the file's header for the
schema). ``load_tf2onnx_table()`` gives a ``Tf2OnnxTable``:

    table = load_tf2onnx_table()
    table.handled("Conv2D", 13)      # True: tf2onnx converts Conv2D at opset 13
    table.emits("Conv2D", 13)        # ['Conv', 'Transpose']
    table.error("DecodeJpeg", 13)    # "Unsupported ops: Counter({'DecodeJpeg': 1})"

An opset that was not measured uses the nearest measured opset below it. ``DEPLOY_TARGETS_DIR``
moves the table with the targets (``$DEPLOY_TARGETS_DIR/ops/tf2onnx.json``).

Imports only the standard library and PyYAML.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import json

from pipeline.errors import DeployError
from pipeline.targets.files import load_cached, op_tables_dir

TABLE_FILE = "tf2onnx.json"  # in <targets dir>/ops/
REGENERATE = "python scripts/gen_tf2onnx_table.py"



@dataclass(frozen=True)
class Tf2OnnxTable:
    """tf2onnx's TF -> ONNX mapping at the tf2onnx version the table was generated with."""

    path: Path
    versions: Dict[str, str]  # tf2onnx, tensorflow, onnx, onnxruntime the table was measured with
    max_opset: int  # the highest opset tf2onnx converts to; it refuses a higher one
    opsets_measured: Tuple[int, ...]
    bookkeeping: Tuple[str, ...]  # ONNX ops emitted around the real work (Constant, Identity)
    handler_min_opset: Dict[str, int]  # TF op -> lowest opset with a handler (ONNX domain)
    without_handler: Dict[str, dict]  # TF op -> {converted_by, opsets}: converts with no handler
    _emits: Dict[str, Dict[int, Tuple[str, ...]]] = field(repr=False)
    _errors: Dict[str, Dict[int, str]] = field(repr=False)
    _variants: Dict[str, list] = field(repr=False)

    @property
    def tf2onnx_version(self) -> str:
        return self.versions.get("tf2onnx", "")

    def measured(self, tf_op: str) -> bool:
        """Whether the table holds a measurement of ``tf_op`` (at any opset)."""
        return tf_op in self._emits or tf_op in self._errors

    def handled(self, tf_op: str, opset: int) -> bool:
        """Whether tf2onnx has a conversion for ``tf_op`` at ``opset``.

        True when a handler is registered at or below ``opset``, or when the op has no handler but
        was measured converting (removed by grappler, or turned into Loop/If by tf2onnx's rewriters)
        at a measured opset at or below ``opset``. False above ``max_opset``: tf2onnx refuses it.
        A handled op may still fail on some attributes or inputs: see ``error``.
        """
        if opset > self.max_opset:
            return False
        low = self.handler_min_opset.get(tf_op)
        if low is not None:
            return low <= opset
        rewritten = self.without_handler.get(tf_op)
        return bool(rewritten) and any(o <= opset for o in rewritten.get("opsets", ()))

    def emits(self, tf_op: str, opset: int, attrs: Optional[dict] = None) -> Optional[List[str]]:
        """The ONNX op types tf2onnx emits for ``tf_op`` at ``opset`` (sorted; [] = no node).

        None: not measured at or below ``opset``, or no measured variant converted there (``error``
        then says why). The list is the union over the variants measured (see ``variants``).
        ``attrs`` (the graph node's attributes as plain values: {"mode": "REFLECT", "T": "float32"})
        narrows it to the variants whose recorded attrs agree on every attribute both name; when no
        converted variant agrees, the union is returned.
        """
        at = self._measured_at(tf_op, opset)
        if at is None:
            return None
        emitted = self._emits.get(tf_op, {}).get(at)
        if emitted is None:
            return None
        if attrs:
            key = str(at)
            matching = [v["emits"][key] for v in self._variants.get(tf_op, ())
                        if key in (v.get("emits") or {}) and _agrees(v.get("attrs") or {}, attrs)]
            if matching:
                return sorted({op for ops in matching for op in ops})
        return list(emitted)

    def error(self, tf_op: str, opset: int) -> Optional[str]:
        """tf2onnx's error (first line) when converting ``tf_op`` at ``opset`` fails; None otherwise.

        Set when every measured variant failed, and above ``max_opset``. None when not measured.
        """
        if opset > self.max_opset:
            return "tf2onnx {} converts up to opset {} (it refuses opset {})".format(
                self.tf2onnx_version, self.max_opset, opset)
        at = self._measured_at(tf_op, opset)
        if at is None:
            return None
        return self._errors.get(tf_op, {}).get(at)

    def variant_errors(self, tf_op: str, opset: int) -> Dict[str, str]:
        """{variant: error} for the measured variants of ``tf_op`` that failed at ``opset``
        (e.g. FusedBatchNorm in training mode, soft NMS) even when other variants converted."""
        at = self._measured_at(tf_op, opset)
        if at is None:
            return {}
        key = str(at)
        return {v["variant"]: v["errors"][key] for v in self._variants.get(tf_op, ())
                if key in (v.get("errors") or {})}

    def variants(self, tf_op: str) -> list:
        """What was measured for ``tf_op``: one dict per variant, as in the file."""
        return list(self._variants.get(tf_op, ()))

    def _measured_at(self, tf_op: str, opset: int) -> Optional[int]:
        """The measured opset to answer for ``opset``: the highest measured one <= opset."""
        have = set(self._emits.get(tf_op, ())) | set(self._errors.get(tf_op, ()))
        below = [o for o in have if o <= opset]
        return max(below) if below else None


def _agrees(recorded: dict, attrs: dict) -> bool:
    return all(attrs[name] == value for name, value in recorded.items() if name in attrs)


def tf2onnx_table_path() -> Path:
    """<targets dir>/ops/tf2onnx.json; ``DEPLOY_TARGETS_DIR`` replaces the repo's targets/."""
    return op_tables_dir() / TABLE_FILE


def load_tf2onnx_table() -> Tf2OnnxTable:
    """The tf2onnx table; cached per (path, mtime, size), so an edited or regenerated file is re-read."""
    path = tf2onnx_table_path()
    try:
        return load_cached(path, parse_tf2onnx_table)
    except FileNotFoundError:
        raise DeployError("{}: no tf2onnx table; generate it with `{}` (it needs the tf extra)".format(
            path, REGENERATE)) from None


def parse_tf2onnx_table(path):
    """Read and check the table at ``path`` (load_tf2onnx_table caches it per path, mtime and size)."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            data = json.load(handle)
    except ValueError as exc:
        raise DeployError("{}: invalid JSON: {}; regenerate it with `{}`".format(
            path, " ".join(str(exc).split()), REGENERATE)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeployError("{}: cannot read the tf2onnx table: {}".format(path, exc)) from None
    try:
        return _table(path, data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DeployError("{}: not a tf2onnx table ({}: {}); regenerate it with `{}`".format(
            path, type(exc).__name__, exc, REGENERATE)) from None


def _table(path, data):
    if not isinstance(data, dict) or data.get("tool") != "tf2onnx":
        raise ValueError("expected a mapping with tool: tf2onnx")

    def per_opset(entries, convert):
        return {op: {int(k): convert(v) for k, v in by_opset.items()} for op, by_opset in (entries or {}).items()}

    return Tf2OnnxTable(
        path=path,
        versions={k: str(data[k]) for k in ("tf2onnx", "tensorflow", "onnx", "onnxruntime") if k in data},
        max_opset=int(data["max_opset"]),
        opsets_measured=tuple(int(o) for o in data["opsets_measured"]),
        bookkeeping=tuple(data.get("bookkeeping") or ()),
        handler_min_opset={op: int(h["min_opset"]) for op, h in data["handlers"].items()},
        without_handler=dict(data.get("without_handler") or {}),
        _emits=per_opset(data.get("emits"), tuple),
        _errors=per_opset(data.get("errors"), str),
        _variants=dict(data.get("variants") or {}),
    )
