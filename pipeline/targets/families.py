"""Op families: the kinds of ops users meet in deploy graphs (input pipelines, detection
post-processing, control flow, optimizer/saver/summary ops, variables...), with their cause and
fix. Data: ``targets/ops/op_families.yaml``; the TensorFlow op registry: ``tensorflow_ops.yaml``."""

import functools
from dataclasses import dataclass
from typing import Optional

from pipeline.targets.files import data_file


@dataclass
class Family:
    name: str
    ops: frozenset
    prefixes: tuple
    suffixes: tuple
    cause: str
    fix: str
    rewrite: Optional[str]
    severity: str
    batch_dependent: bool
    cut: bool
    routes: tuple = ()  # routes the family explains findings of; () = every route
    explains_only: bool = False  # never a finding by itself

    def has(self, op):
        return op in self.ops or op.startswith(self.prefixes) or op.endswith(self.suffixes)


@functools.lru_cache(maxsize=None)
def families():
    data = data_file("op_families.yaml")
    out = []
    for name, f in data["families"].items():
        out.append(Family(
            name=name, ops=frozenset(f.get("ops", ())), prefixes=tuple(f.get("prefixes", ())),
            suffixes=tuple(f.get("suffixes", ())), cause=f["cause"], fix=f["fix"], rewrite=f.get("rewrite"),
            severity=f.get("severity", "warning"), batch_dependent=bool(f.get("batch_dependent")), cut=bool(f.get("cut")),
            routes=tuple(f.get("routes", ())), explains_only=bool(f.get("explains_only")),
        ))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def family_of(op):
    for fam in families():
        if fam.has(op):
            return fam
    return None


@functools.lru_cache(maxsize=None)
def tensorflow_ops():
    """Every op the TensorFlow that generated targets/ops/tensorflow_ops.yaml registers."""
    data = data_file("tensorflow_ops.yaml")
    return data["tensorflow"], frozenset(data["ops"])
