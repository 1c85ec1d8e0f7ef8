"""What `deploy check` reports: findings, per-route verdicts, and the report that holds them."""

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

SEVERITIES = ("blocker", "warning", "info")
# Routes in order of preference when several have no blocker.
ROUTE_PREFERENCE = ("onnx", "uff", "tftrt")
SCHEMA = "deploy.check/1"


@dataclass
class Finding:
    severity: str  # blocker | warning | info
    route: str  # uff | onnx | tftrt | all
    kind: str  # unsupported_op | opset | dtype | dynamic_shape | attribute | custom_op | plugin | pattern | ...
    op: Optional[str]
    nodes: List[str]
    cause: str
    fix: str
    rewrite: Optional[str] = None
    batch_dependent: bool = False

    def to_dict(self):
        return asdict(self)


@dataclass
class RouteResult:
    route: str
    table: Optional[str]  # op table used, e.g. onnx_trt_8.2
    detail: str  # e.g. "opset 13", "TensorRT 8.2 UFF parser"
    findings: List[Finding] = field(default_factory=list)
    accepted_but_wrong: List[Finding] = field(default_factory=list)
    applicable: bool = True
    note: str = ""
    opset: Optional[int] = None  # onnx route: the opset checked

    @property
    def blockers(self):
        return sum(1 for f in self.findings if f.severity == "blocker")

    @property
    def verdict(self):
        if not self.applicable:
            return "N/A"
        return "YES" if self.blockers == 0 else "NO"


@dataclass
class CheckReport:
    model: Dict  # path, format, kind, nodes, op_types, inputs, outputs, opset
    target: Dict  # name, tensorrt, jetpack, routes
    routes: List[RouteResult]
    findings: List[Finding]  # route-independent (route "all")

    @property
    def recommended(self):
        """The route to take: no blocker first, then fewest blockers; onnx > uff > tftrt on ties."""
        usable = [r for r in self.routes if r.applicable]
        if not usable:
            return None
        rank = {name: i for i, name in enumerate(ROUTE_PREFERENCE)}
        return min(usable, key=lambda r: (r.blockers + self.blockers_for(r.route), rank.get(r.route, 99)))

    def blockers_for(self, route):
        return sum(1 for f in self.findings if f.severity == "blocker" and f.route in ("all", route))

    def total_blockers(self, route):
        result = next(r for r in self.routes if r.route == route)
        return result.blockers + self.blockers_for(route)

    @property
    def deployable(self):
        best = self.recommended
        return best is not None and self.total_blockers(best.route) == 0

    def to_dict(self):
        best = self.recommended
        return {
            "schema": SCHEMA,
            "model": self.model,
            "target": self.target,
            "deployable": self.deployable,
            "recommended": None if best is None else {"route": best.route, "detail": best.detail,
                                                      "blockers": self.total_blockers(best.route)},
            "routes": [
                {
                    "route": r.route,
                    "verdict": "N/A" if not r.applicable else ("YES" if self.total_blockers(r.route) == 0 else "NO"),
                    "blockers": self.total_blockers(r.route) if r.applicable else 0,
                    "table": r.table,
                    "detail": r.detail,
                    "opset": r.opset,
                    "note": r.note,
                    "findings": [f.to_dict() for f in r.findings],
                    "accepted_but_wrong": [f.to_dict() for f in r.accepted_but_wrong],
                }
                for r in self.routes
            ],
            "findings": [f.to_dict() for f in self.findings],
        }
