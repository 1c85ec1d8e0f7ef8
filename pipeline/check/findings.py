"""What `deploy check` reports: findings, per-route verdicts, and the report that holds them."""

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

SEVERITIES = ("blocker", "warning", "info")
# Routes in order of preference when several have no blocker.
ROUTE_PREFERENCE = ("onnx", "uff", "tftrt")
# deploy.check/2: a route's verdict is YES only with no blocker and nothing accepted but wrong;
# graph-level findings (not an inference graph) count on every route; tftrt reports its share.
SCHEMA = "deploy.check/2"
# A TF-TRT route whose TensorRT engines run less than this share of the compute is ranked after
# every route TensorRT runs whole.
TFTRT_MINOR_SHARE = 0.5


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
    share: Optional[Dict] = None  # tftrt: what TensorRT would run {"nodes": 0..1, "compute": 0..1, ...}

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
    prediction: Optional[Dict] = None  # what `deploy rewrite --auto` would give (see check.predict)

    def route(self, name):
        return next(r for r in self.routes if r.route == name)

    def blockers_for(self, route):
        return sum(1 for f in self.findings if f.severity == "blocker" and f.route in ("all", route))

    def total_blockers(self, route):
        return self.route(route).blockers + self.blockers_for(route)

    def wrong(self, route):
        """What the route converts without complaint but runs wrong (random, batch-dependent)."""
        return len(self.route(route).accepted_but_wrong)

    def problems(self, route):
        """Blockers plus accepted-but-wrong findings: a route is YES only at 0."""
        return self.total_blockers(route) + self.wrong(route)

    def verdict(self, route):
        r = self.route(route)
        if not r.applicable:
            return "N/A"
        return "YES" if self.problems(route) == 0 else "NO"

    def _rank(self, r):
        minor = r.route == "tftrt" and r.share is not None and r.share.get("compute", 1.0) < TFTRT_MINOR_SHARE
        order = {name: i for i, name in enumerate(ROUTE_PREFERENCE)}
        return (self.problems(r.route) > 0, minor, self.total_blockers(r.route), self.wrong(r.route),
                order.get(r.route, 99))

    @property
    def recommended(self):
        """The route to take: one that converts and behaves first; a TF-TRT route whose engines run
        little of the compute after the routes TensorRT runs whole; then the fewest blockers, the
        fewest accepted-but-wrong findings; onnx > uff > tftrt on ties."""
        usable = [r for r in self.routes if r.applicable]
        return min(usable, key=self._rank) if usable else None

    @property
    def deployable(self):
        best = self.recommended
        return best is not None and self.problems(best.route) == 0

    def to_dict(self):
        best = self.recommended
        return {
            "schema": SCHEMA,
            "model": self.model,
            "target": self.target,
            "verdict": "YES" if self.deployable else "NO",
            "deployable": self.deployable,
            "recommended": None if best is None else {
                "route": best.route, "detail": best.detail, "blockers": self.total_blockers(best.route),
                "accepted_but_wrong": self.wrong(best.route)},
            "after_rewrite": self.prediction,
            "routes": [
                {
                    "route": r.route,
                    "verdict": self.verdict(r.route),
                    "blockers": self.total_blockers(r.route) if r.applicable else 0,
                    "table": r.table,
                    "detail": r.detail,
                    "opset": r.opset,
                    "note": r.note,
                    "share": r.share,
                    "findings": [f.to_dict() for f in r.findings],
                    "accepted_but_wrong": [f.to_dict() for f in r.accepted_but_wrong],
                }
                for r in self.routes
            ],
            "findings": [f.to_dict() for f in self.findings],
        }
