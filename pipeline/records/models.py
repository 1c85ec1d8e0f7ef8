"""One pydantic model per file deploy writes into a run folder (run.json, manifest.json, benchmark.json,
check.json, rewrite.json, the two comparison.json, history.json, engine.json); ``MODELS`` by kind.
Reading and writing them is pipeline.records's. The kinds of value (with their ranges) are
pipeline.records.fields's, the objects inside the files pipeline.records.parts's."""

from typing import Any, ClassVar, Dict, List, Optional

from pydantic import Field

from pipeline.records.fields import (ERROR, BatchSize, Bool, Count, Finite, Fraction,  # noqa: F401 (ERROR: records reads it)
                                     Iterations, K, Millijoules, Milliwatts, Ms, Ms0, NonNegative, Number, Obj,
                                     Percentiles, Positive, PositiveInt, Rate, Record, RunRef, Seconds0, Str, Whole)
from pipeline.records.parts import (CI, BenchmarkedModel, BenchmarkSettings, CheckTarget, CheckVerdict,
                                    ConsistencyImages, ConsistencyOutput, Finding, GateReference, GateRow, GpuCompute,
                                    Hardware, Host, Output, PassComparison, Rails, Recommended, RunSettings,
                                    Share, StageOptions, Tolerance)

# ------------------------------------------------------------------------------------------------ models
# One pydantic model per file. Each is strict on the keys a reader uses (a type and a range: a latency in
# milliseconds from 1e-9 to 1e9, a batch size that is a whole number from 1 to 65,536, 101 ascending
# percentiles) and on the objects and lists inside it, and allows any other key. ``_first_error``
# (pipeline.records) turns the first error into one line naming the file and the key.


class File(Record):
    """A file deploy writes: ``NAME`` and ``VERSION`` make its ``schema`` (deploy.NAME/VERSION)."""

    NAME: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    FILE: ClassVar[str] = ""  # where it lives in a run folder (documentation)
    WHAT: ClassVar[str] = ""  # "cannot read WHAT"
    HINT: ClassVar[str] = "run the stage again: deploy run --force STAGE"
    ALLOW_NAN: ClassVar[bool] = False  # whether the writer may write NaN/Infinity tokens (history: a diverged loss)


# ---------------------------------------------------------------------------------------------- run.json


class StageEntry(Record):
    name: Str
    status: Optional[Str] = None
    seconds: Optional[Seconds0] = None
    message: Optional[Str] = None
    results: Optional[Obj] = None


class RunRecord(File):
    """``<run>/run.json``: what the last ``deploy run`` did, stage by stage (pipeline.runner)."""

    NAME, VERSION, FILE, WHAT, HINT = "run", 1, "run.json", "the run record", "run deploy run again"
    run: Optional[Str] = None
    config: Optional[Str] = None
    overrides: Optional[List[Str]] = None  # the --set KEY=VALUE texts of the run
    target: Optional[Str] = None
    started: Optional[Str] = None
    finished: Optional[Str] = None
    exit_code: Optional[Whole] = None
    commit: Optional[Str] = None
    commit_source: Optional[Str] = None
    config_digest: Optional[Str] = None
    settings: Optional[RunSettings] = None
    ci: Optional[CI] = None
    stages: Optional[List[StageEntry]] = None


# ----------------------------------------------------------------------------------------- manifest.json


class Manifest(File):
    """``<run>/<stage>/manifest.json``: how a stage's result was made (pipeline.runner, pipeline.cache)."""

    NAME, VERSION, FILE, WHAT = "manifest", 1, "STAGE/manifest.json", "the stage manifest"
    stage: Optional[Str] = None
    version: Optional[Whole] = None
    status: Optional[Str] = None
    key: Optional[Str] = None
    inputs_key: Optional[Str] = None
    started: Optional[Str] = None
    duration_s: Optional[Seconds0] = None
    results: Optional[Obj] = None
    outputs: Optional[Dict[str, Output]] = None
    options: Optional[StageOptions] = None
    inputs: Optional[Dict[str, Obj]] = None


# ---------------------------------------------------------------------------------------- benchmark.json


class Power(Record):
    samples: Optional[Count] = None
    board_mw: Optional[Milliwatts] = None
    board_power_source: Optional[Str] = None
    rails_mw: Optional[Rails] = None
    energy_per_image_mj: Optional[Millijoules] = None
    window_s: Optional[Seconds0] = None
    temps_max_c: Optional[Dict[str, Finite]] = None  # the hottest reading per tegrastats sensor
    clocks_mhz: Optional[Dict[str, Dict[str, NonNegative]]] = None  # {"gpu"|"emc": {"min", "max"}}, the gate reads it
    throttled: Optional[Str] = None  # why the window is not the board's steady state


class BenchmarkLoop(Record):  # the back-to-back loop behind throughput_ips
    calls: Optional[Count] = None
    seconds: Optional[Seconds0] = None
    copies_overlap: Optional[Bool] = None  # false: copies in order with compute (one stream); null: no copies


class BenchmarkRow(Record):
    batch_size: BatchSize
    mean_ms: Optional[Ms] = None
    p50_ms: Optional[Ms] = None
    p90_ms: Optional[Ms] = None
    p95_ms: Optional[Ms] = None
    p99_ms: Optional[Ms] = None
    max_ms: Optional[Ms] = None
    std_ms: Optional[Ms0] = None
    min_ms: Optional[Ms0] = None  # one call below the clock's resolution reads 0
    throughput_ips: Optional[Rate] = None
    iterations: Optional[Iterations] = None
    percentiles_ms: Optional[Percentiles] = None
    phases_mean_ms: Optional[Dict[str, Ms0]] = None
    gpu_compute_ms: Optional[GpuCompute] = None
    power: Optional[Power] = None
    loop: Optional[BenchmarkLoop] = None
    feed_sha256: Optional[Str] = None


class Fingerprint(Record):
    clocks_locked: Optional[Bool] = None


class Where(Record):
    runtime: Optional[Str] = None
    target: Optional[Str] = None
    on_target_device: Optional[Bool] = None
    note: Optional[Str] = None
    device: Optional[Str] = None
    hardware: Optional[Str] = None
    fingerprint: Optional[Fingerprint] = None
    host: Optional[Host] = None
    warnings: Optional[List[Str]] = None


class Consistency(Record):
    passed: Optional[Bool] = None
    batch_sizes: Optional[List[BatchSize]] = None
    images: Optional[ConsistencyImages] = None
    outputs: Optional[List[ConsistencyOutput]] = None
    first_divergence: Optional[Str] = None
    first_divergence_note: Optional[Str] = None


class Accuracy(Record):
    top1_agreement: Optional[Fraction] = None
    max_abs_diff: Optional[NonNegative] = None
    images: Optional[PositiveInt] = None
    source: Optional[Str] = None
    tolerance: Optional[Tolerance] = None


class Benchmark(File):
    """``<run>/benchmark/benchmark.json``: latency, throughput, power per batch size (pipeline.bench.report)."""

    NAME, VERSION, FILE, WHAT = "benchmark", 1, "benchmark/benchmark.json", "benchmark figures"
    HINT = "run the stage again: deploy run --force benchmark"
    where: Optional[Where] = None
    model: Optional[BenchmarkedModel] = None
    settings: Optional[BenchmarkSettings] = None
    results: Optional[List[BenchmarkRow]] = None
    consistency: Optional[Consistency] = None
    accuracy: Optional[Accuracy] = None


# -------------------------------------------------------------------------------------------- check.json


class CheckRoute(Record):
    route: Optional[Str] = None
    detail: Optional[Str] = None
    blockers: Optional[Count] = None
    findings: Optional[List[Finding]] = None
    accepted_but_wrong: Optional[List[Any]] = None
    share: Optional[Share] = None


class CheckEstimate(Record):
    """``deploy check``'s latency estimate (pipeline.estimate.summary.check_estimate): the figures when made,
    else the reason."""

    made: Bool
    reason: Optional[Str] = None
    target: Optional[Str] = None
    precision: Optional[Str] = None
    batch: Optional[BatchSize] = None
    latency_ms: Optional[Ms] = None
    low_ms: Optional[Ms] = None
    high_ms: Optional[Ms] = None
    throughput: Optional[Rate] = None
    bound: Optional[Str] = None
    power_mode: Optional[Str] = None
    unknown_layers: Optional[Count] = None


class Check(File):
    """``<run>/check/check.json`` and ``deploy check --format json`` (pipeline.check.report)."""

    NAME, VERSION, FILE, WHAT = "check", 2, "check/check.json", "the check report"
    HINT = "run the stage again: deploy run --force check"
    deployable: Optional[Bool] = None
    verdict: Optional[Str] = None
    target: Optional[CheckTarget] = None
    recommended: Optional[Recommended] = None
    routes: Optional[List[CheckRoute]] = None
    findings: Optional[List[Any]] = None
    estimate: Optional[CheckEstimate] = None


# ------------------------------------------------------------------------------------------ rewrite.json


class RewritePass(Record):
    pass_: Optional[Str] = Field(None, alias="pass")
    ops: Optional[Dict[str, Whole]] = None
    sites: Optional[List[Any]] = None
    comparison: Optional[PassComparison] = None
    changes_behaviour: Optional[Bool] = None


class Rewrite(File):
    """``<run>/rewrite/rewrite.json`` and ``deploy rewrite``'s ``OUT.rewrite.json`` (pipeline.rewrite.command)."""

    NAME, VERSION, FILE, WHAT = "rewrite", 1, "rewrite/rewrite.json", "the rewrite receipt"
    HINT = "run the stage again: deploy run --force rewrite"
    model: Optional[Str] = None
    target: Optional[Str] = None
    passes: Optional[List[RewritePass]] = None
    nodes: Optional[Dict[str, Optional[Count]]] = None
    check_before: Optional[CheckVerdict] = None
    check_after: Optional[CheckVerdict] = None


# ------------------------------------------------------------------------- convert/comparison.json


class Runtimes(Record):
    reference: Optional[Any] = None
    candidate: Optional[Obj] = None  # the ONNX Runtime session's label: {"runtime", ...}


class Conversion(File):
    """``<run>/convert/comparison.json``: TensorFlow against ONNX Runtime on the same images (convert stage)."""

    NAME, VERSION, FILE, WHAT = "conversion", 1, "convert/comparison.json", "the conversion comparison"
    HINT = "run the stage again: deploy run --force convert"
    max_abs_diff: Optional[NonNegative] = None
    tolerance: Optional[Positive] = None
    within_tolerance: Optional[Bool] = None  # the verdict: numeric.compare_runs at atol=tolerance, rtol 0
    samples: Optional[PositiveInt] = None
    inputs: Optional[Str] = None
    outputs: Optional[Dict[str, Obj]] = None
    runtimes: Optional[Runtimes] = None
    why: Optional[Str] = None


# ------------------------------------------------------------------------------- <run>/comparison.json


class Comparison(File):
    """``deploy compare -o FILE`` (the gate's verdict; ``<run>/comparison.json`` for deploy report)."""

    NAME, VERSION, FILE, WHAT = "comparison", 2, "comparison.json", "the gate's verdict"
    HINT = "run deploy compare -o again"
    verdict: Optional[Str] = None
    passed: Optional[Bool] = None
    reasons: Optional[List[Str]] = None
    notes: Optional[List[Str]] = None
    rows: Optional[List[GateRow]] = None
    baseline: Optional[RunRef] = None  # a run folder's name (an older compare) or {dir, name, when, failed}
    current: Optional[RunRef] = None
    reference: Optional[GateReference] = None
    hardware: Optional[Hardware] = None
    tolerance: Optional[NonNegative] = None
    accuracy_tolerance: Optional[NonNegative] = None
    k: Optional[K] = None
    regressions: Optional[Count] = None


# ------------------------------------------------------------------------------------------ history.json


class Epoch(Record):
    loss: Optional[Number] = None
    val_loss: Optional[Number] = None
    accuracy: Optional[Finite] = None
    val_accuracy: Optional[Finite] = None


class History(File):
    """``<run>/train/history.json``: the classes and each epoch's loss and accuracy (train stage)."""

    NAME, VERSION, FILE, WHAT = "history", 1, "train/history.json", "the training history"
    HINT = "run the stage again: deploy run --force train"
    ALLOW_NAN = True
    classes: Optional[List[Str]] = None
    epochs: Optional[List[Epoch]] = None
    restore: Optional[Obj] = None


# ------------------------------------------------------------------------------------------- engine.json


class Engine(File):
    """``<run>/engine/engine.json``: what the engine build found (pipeline.device.engine)."""

    NAME, VERSION, FILE, WHAT = "engine", 1, "engine/engine.json", "the engine record"
    HINT = "run the stage again: deploy run --force engine"
    tensorrt_version: Optional[Str] = None
    precision: Optional[Str] = None
    build_s: Optional[Seconds0] = None
    engine_bytes: Optional[Count] = None
    engine_sha256: Optional[Str] = None
    route: Optional[Str] = None
    device: Optional[Obj] = None
    profile: Optional[Dict[str, Dict[str, List[PositiveInt]]]] = None
    dla: Optional[Obj] = None


from pipeline.records.estimate import Estimate  # noqa: E402 (deploy estimate's JSON, its own module)

MODELS = {m.NAME: m for m in (RunRecord, Manifest, Benchmark, Check, Rewrite, Conversion, Comparison, History, Engine,
                              Estimate)}

