"""The objects inside deploy's files (pipeline.records.models): run.json's ``settings`` and ``ci``, a
manifest's outputs and options, benchmark.json's ``where.host``, ``model``, consistency and accuracy
parts, check.json's target and findings, a rewrite pass's comparison, the gate's rows. Each names the
keys a reader of the file uses (``deploy report``, ``deploy compare``, the cache) with their kind, so
a reader gets an object where it calls ``.get``, a list where it loops and a number where it computes;
any other key is kept."""

from typing import Any, Dict, List, Optional

from pipeline.records.fields import (BatchSize, Bool, Count, Figure, Finite, Iterations, Milliwatts, Ms0, NonNegative,
                                     Obj, Pair, Record, Seconds0, Str, Whole)

# --- run.json


class EngineSettings(Record):
    """``stages.engine`` of the config (run.json's settings, the engine manifest's options)."""

    precision: Optional[Str] = None
    max_batch_size: Optional[BatchSize] = None
    workspace_mb: Optional[Count] = None
    builder: Optional[Str] = None
    dla_core: Optional[Whole] = None
    calibration_images: Optional[Count] = None


class BenchmarkSettings(Record):
    """``stages.benchmark`` of the config (run.json's settings, the benchmark manifest's options and
    benchmark.json's ``settings``)."""

    batch_sizes: Optional[List[BatchSize]] = None
    iterations: Optional[Iterations] = None
    warmup: Optional[Count] = None
    duration_s: Optional[Seconds0] = None
    inputs: Optional[Str] = None


class DeviceSettings(Record):
    backend: Optional[Str] = None
    transport: Optional[Str] = None


class RunSettings(Record):
    """run.json's ``settings``: what the report shows while a stage is pending."""

    engine: Optional[EngineSettings] = None
    benchmark: Optional[BenchmarkSettings] = None
    device: Optional[DeviceSettings] = None


class CI(Record):
    """run.json's ``ci``: the workflow run that made the night."""

    run_url: Optional[Str] = None
    runner: Optional[Str] = None


# --- manifest.json


class Output(Record):
    path: Optional[Str] = None
    sha256: Optional[Str] = None
    size: Optional[Count] = None
    stat: Optional[Str] = None


class StageOptions(EngineSettings, BenchmarkSettings):
    """A manifest's ``options``: the stage's config section (only the engine's and the benchmark's keys are read)."""


# --- benchmark.json


class Host(Record):
    """``where.host``: the machine a host benchmark ran on."""

    node: Optional[Str] = None
    cpu: Optional[Str] = None
    processor: Optional[Str] = None
    cpu_count: Optional[Count] = None
    cores: Optional[Count] = None
    machine: Optional[Str] = None
    system: Optional[Str] = None


class BenchmarkedModel(Record):
    name: Optional[Str] = None
    sha256: Optional[Str] = None
    bytes: Optional[Count] = None
    inputs: Optional[List[Obj]] = None


class ConsistencyImages(Record):
    count: Optional[Count] = None
    source: Optional[Str] = None


class ConsistencyOutput(Record):
    name: Optional[Str] = None
    max_abs_diff: Optional[NonNegative] = None
    passed: Optional[Bool] = None
    within_tolerance: Optional[Bool] = None


class Tolerance(Record):
    precision: Optional[Str] = None
    atol: Optional[NonNegative] = None
    rtol: Optional[NonNegative] = None


GpuCompute = Dict[str, Optional[Ms0]]
Rails = Dict[str, Milliwatts]

# --- check.json


class CheckTarget(Record):
    name: Optional[Str] = None
    tensorrt: Optional[Str] = None
    jetpack: Optional[Str] = None


class Recommended(Record):
    route: Optional[Str] = None
    detail: Optional[Str] = None
    blockers: Optional[Count] = None


class Finding(Record):
    kind: Optional[Str] = None
    cause: Optional[Str] = None
    fix: Optional[Str] = None
    nodes: Optional[List[Any]] = None


class Share(Record):
    """A route's share of the model's compute (``flops``: per image)."""

    flops: Optional[NonNegative] = None
    estimated: Optional[Bool] = None


# --- rewrite.json


class PassComparison(Record):
    max_abs_diff: Optional[NonNegative] = None
    passed: Optional[Bool] = None


class CheckVerdict(Record):
    """rewrite.json's ``check_before`` / ``check_after``."""

    recommended: Optional[Str] = None


# --- the gate's comparison.json

class GateRow(Record):
    """One figure the gate judged (``deploy compare``): ``rows`` of deploy.comparison/2; version 1's rows
    (``metric``, ``verdict``, ``why``) are read too."""

    figure: Optional[Str] = None
    label: Optional[Str] = None
    batch_size: Optional[BatchSize] = None
    baseline: Optional[Figure] = None
    current: Optional[Figure] = None
    reference: Optional[Figure] = None
    band: Optional[Pair] = None
    interval: Optional[Pair] = None
    change: Optional[Finite] = None
    status: Optional[Str] = None
    note: Optional[Str] = None
    metric: Optional[Str] = None
    verdict: Optional[Str] = None
    why: Optional[Str] = None


class GateReference(Record):
    nights: Optional[Count] = None
    failed_nights: Optional[Count] = None
    fingerprint: Optional[Obj] = None
    runs: Optional[List[Str]] = None


class Hardware(Record):
    label: Optional[Str] = None
    kind: Optional[Str] = None
