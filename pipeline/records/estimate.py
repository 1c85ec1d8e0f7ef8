"""``deploy estimate --format json``: the latency estimate per target, precision and batch (pipeline.estimate).

Kept in its own module (registered in ``MODELS`` by pipeline.records.models) so the estimate's schema
lives beside nothing else's."""

from typing import ClassVar, Dict, List, Optional

from pipeline.records.fields import BatchSize, Count, Fraction, Ms, NonNegative, Rate, Record, Str


class EstimatedLayer(Record):
    name: Str
    kind: Str
    ms: NonNegative
    bound: Str
    gflops: Optional[NonNegative] = None


class TargetEstimate(Record):
    target: Str
    precision: Str
    batch: BatchSize
    latency_ms: Ms
    low_ms: Ms
    high_ms: Ms
    throughput: Rate
    bound: Str
    shares: Optional[Dict[str, Fraction]] = None
    power_mode: Str
    calibration: Str
    top_layers: List[EstimatedLayer]
    unknown_count: Optional[Count] = None
    measured_ms: Optional[Ms] = None


class Estimate(Record):
    """What ``deploy estimate --format json`` prints (schema deploy.estimate/1)."""

    NAME: ClassVar[str] = "estimate"
    VERSION: ClassVar[int] = 1
    FILE: ClassVar[str] = "(deploy estimate --format json)"
    WHAT: ClassVar[str] = "a latency estimate"
    HINT: ClassVar[str] = "run deploy estimate again"
    ALLOW_NAN: ClassVar[bool] = False
    model: Str
    layers: Count
    gflops: NonNegative
    estimates: List[TargetEstimate]
