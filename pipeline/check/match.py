"""A recognised subgraph of a model (patterns, dropout): which nodes, why they are there, how to fix them."""

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class Match:
    kind: str  # dropout_training | batchnorm_training | batch_reduction | family name
    nodes: List[str]
    cause: str
    fix: str
    rewrite: Optional[str] = None
    severity: str = "warning"
    batch_dependent: bool = False
    stochastic: bool = False
    family: Optional[str] = None
    boundary: List[str] = field(default_factory=list)
    routes: tuple = ()  # routes the match explains; () = every route
    explains_only: bool = False
    fed_by: List[str] = field(default_factory=list)  # placeholders fed at run time (a dropout's keep_prob)

