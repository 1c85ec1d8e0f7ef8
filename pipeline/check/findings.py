"""What `deploy check` reports: findings, per-route verdicts, and the report that holds them."""

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

from pipeline.targets.routes import RUNNABLE_ROUTES

SEVERITIES = ("blocker", "warning", "info")
# Routes in order of preference when several have no blocker.
ROUTE_PREFERENCE = ("onnx", "uff", "tftrt")
# The routes `deploy run` can take to an engine (targets.routes.RUNNABLE_ROUTES, the choices of
# stages.convert.format). Only these give the verdict and the recommended route; TF-TRT keeps part of
# the model in TensorFlow on the board and deploy run has no stage for it: information only.
# RouteResult.basis: how the onnx route of a TensorFlow graph was judged
CONVERTED = "converted"  # tf2onnx ran (in a subprocess, on the screened graph); its ONNX model was checked
PREDICTED = "predicted"  # from the tf2onnx table: "predicted, tf2onnx not run"
# deploy.check/2: a route's verdict is YES only with no blocker and nothing accepted but wrong;
# graph-level findings (not an inference graph) count on every route; tftrt reports its share;
# only onnx and uff (RUNNABLE_ROUTES) make the verdict; routes say their basis (converted/predicted).
SCHEMA = "deploy.check/2"
# TensorRT 8.x casts an INT64 input to INT32: no pass of deploy's changes it (docs/rewrite.md lists int64_to_int32 as
# not written), so the fix is the model's
INT64_INPUT_FIX = ("nothing to do while its values stay below 2^31; beyond that, make the input int32 in the model "
                   "before export (tf.cast at the input)")


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
    basis: Optional[str] = None  # onnx route of a TF graph: CONVERTED or PREDICTED; None elsewhere
    convert_seconds: Optional[float] = None  # the time the real tf2onnx conversion added
    converter: Optional[Dict] = None  # {"tf2onnx": version, "opset": n, "onnx_nodes": n, "ops": [...], "log": [...]}

    @property
    def runnable(self):
        """Whether `deploy run` can take this route to an engine (TF-TRT: information only)."""
        return self.route in RUNNABLE_ROUTES

    @property
    def basis_label(self):
        if self.basis == CONVERTED:
            return "converted by tf2onnx{} (added {:.1f} s)".format(
                " " + self.converter["tf2onnx"] if self.converter and self.converter.get("tf2onnx") else "",
                self.convert_seconds or 0.0)
        if self.basis == PREDICTED:
            return "predicted, tf2onnx not run" + (": " + self.note if self.note else "")
        return ""

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
        order = {name: i for i, name in enumerate(ROUTE_PREFERENCE)}
        return (self.problems(r.route) > 0, self.total_blockers(r.route), self.wrong(r.route), order.get(r.route, 99))

    @property
    def recommended(self):
        """The route to take, among those `deploy run` can take (onnx, uff): one that converts and
        behaves first; then the fewest blockers, the fewest accepted-but-wrong findings; onnx > uff
        on ties. TF-TRT is never recommended: it is reported as information (``tftrt``)."""
        usable = [r for r in self.routes if r.applicable and r.runnable]
        return min(usable, key=self._rank) if usable else None

    @property
    def tftrt(self):
        """The TF-TRT route's result (information only), or None."""
        return next((r for r in self.routes if r.route == "tftrt" and r.applicable), None)

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
                    "runnable": r.runnable,
                    "basis": r.basis,
                    "convert_seconds": r.convert_seconds,
                    "converter": r.converter,
                    "findings": [f.to_dict() for f in r.findings],
                    "accepted_but_wrong": [f.to_dict() for f in r.accepted_but_wrong],
                }
                for r in self.routes
            ],
            "findings": [f.to_dict() for f in self.findings],
        }
