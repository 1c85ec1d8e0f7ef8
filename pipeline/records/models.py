"""One pydantic model per file deploy writes into a run folder (run.json, manifest.json, benchmark.json,
check.json, rewrite.json, the two comparison.json, history.json, engine.json); ``MODELS`` by kind.
Reading and writing them is pipeline.records's."""

import math
from typing import Any, ClassVar, Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field, PlainValidator
from pydantic_core import PydanticCustomError
from typing_extensions import Annotated

# ------------------------------------------------------------------------------------------------ models
# One pydantic model per file. Each is strict on the keys a reader uses (a type and a range: a finite
# latency above 0, a batch size that is a positive whole number, 101 ascending percentiles) and allows any
# other key. Scalar keys are checked by ``_kind`` validators whose message is what a reader expects ("a
# finite number > 0"); ``_first_error`` turns the first error into one line naming the file and the key.

ERROR = "deploy_record"  # the error type of every check below (pipeline.records reads its message as "expected")


def _kind(expected, ok):
    def validate(value):
        if not ok(value):
            raise PydanticCustomError(ERROR, expected.replace("{", "{{").replace("}", "}}"))
        return value

    return PlainValidator(validate)


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite(v):
    return _num(v) and math.isfinite(v)


def _whole(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _percentiles(v):
    return (isinstance(v, list) and len(v) == 101 and all(_finite(x) and x >= 0 for x in v)
            and all(b >= a for a, b in zip(v, v[1:])))


Str = Annotated[str, _kind("a string", lambda v: isinstance(v, str))]
Bool = Annotated[bool, _kind("true or false (a JSON boolean)", lambda v: isinstance(v, bool))]
Whole = Annotated[int, _kind("a whole number", _whole)]
Count = Annotated[int, _kind("a whole number >= 0", lambda v: _whole(v) and v >= 0)]
PositiveInt = Annotated[int, _kind("a positive whole number", lambda v: _whole(v) and v >= 1)]
Number = Annotated[float, _kind("a number", _num)]  # NaN allowed (a training loss may diverge)
Finite = Annotated[float, _kind("a finite number", _finite)]
Time = Annotated[float, _kind("a finite number > 0", lambda v: _finite(v) and v > 0)]
Time0 = Annotated[float, _kind("a finite number >= 0", lambda v: _finite(v) and v >= 0)]
Fraction = Annotated[float, _kind("a number from 0 to 1", lambda v: _finite(v) and 0 <= v <= 1)]
Percentiles = Annotated[List[float], _kind("101 ascending finite numbers >= 0 (the 0th..100th percentiles)", _percentiles)]
Obj = Dict[str, Any]


class Record(BaseModel):
    """A file's top level or one of its objects: the keys below are checked, any other key is kept."""

    model_config = ConfigDict(extra="allow")


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
    seconds: Optional[Time0] = None
    message: Optional[Str] = None
    results: Optional[Obj] = None


class RunRecord(File):
    """``<run>/run.json``: what the last ``deploy run`` did, stage by stage (pipeline.runner)."""

    NAME, VERSION, FILE, WHAT, HINT = "run", 1, "run.json", "the run record", "run deploy run again"
    run: Optional[Str] = None
    config: Optional[Str] = None
    target: Optional[Str] = None
    started: Optional[Str] = None
    finished: Optional[Str] = None
    exit_code: Optional[Whole] = None
    commit: Optional[Str] = None
    commit_source: Optional[Str] = None
    config_digest: Optional[Str] = None
    settings: Optional[Obj] = None
    ci: Optional[Obj] = None
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
    duration_s: Optional[Time0] = None
    results: Optional[Obj] = None
    outputs: Optional[Dict[str, Obj]] = None
    options: Optional[Obj] = None
    inputs: Optional[Dict[str, Obj]] = None


# ---------------------------------------------------------------------------------------- benchmark.json


class Power(Record):
    samples: Optional[Count] = None
    board_mw: Optional[Time0] = None
    board_power_source: Optional[Str] = None
    rails_mw: Optional[Dict[str, Time0]] = None
    energy_per_image_mj: Optional[Time0] = None
    window_s: Optional[Time0] = None


class BenchmarkRow(Record):
    batch_size: PositiveInt
    mean_ms: Optional[Time] = None
    p50_ms: Optional[Time] = None
    p90_ms: Optional[Time] = None
    p95_ms: Optional[Time] = None
    p99_ms: Optional[Time] = None
    max_ms: Optional[Time] = None
    std_ms: Optional[Time0] = None
    min_ms: Optional[Time0] = None  # one call below the clock's resolution reads 0
    throughput_ips: Optional[Time] = None
    iterations: Optional[PositiveInt] = None
    percentiles_ms: Optional[Percentiles] = None
    phases_mean_ms: Optional[Dict[str, Time0]] = None
    gpu_compute_ms: Optional[Dict[str, Optional[Time0]]] = None
    power: Optional[Power] = None
    feed_sha256: Optional[Str] = None


class Fingerprint(Record):
    clocks_locked: Optional[Bool] = None


class Where(Record):
    runtime: Optional[Str] = None
    target: Optional[Str] = None
    on_target_device: Optional[Bool] = None
    note: Optional[Str] = None
    fingerprint: Optional[Fingerprint] = None
    host: Optional[Obj] = None
    warnings: Optional[List[Str]] = None


class Consistency(Record):
    passed: Optional[Bool] = None
    batch_sizes: Optional[List[PositiveInt]] = None
    images: Optional[Obj] = None
    outputs: Optional[List[Obj]] = None
    first_divergence: Optional[Str] = None


class Accuracy(Record):
    top1_agreement: Optional[Fraction] = None
    max_abs_diff: Optional[Time0] = None
    images: Optional[PositiveInt] = None
    source: Optional[Str] = None
    tolerance: Optional[Obj] = None


class Benchmark(File):
    """``<run>/benchmark/benchmark.json``: latency, throughput, power per batch size (pipeline.bench.report)."""

    NAME, VERSION, FILE, WHAT = "benchmark", 1, "benchmark/benchmark.json", "benchmark figures"
    HINT = "run the stage again: deploy run --force benchmark"
    where: Optional[Where] = None
    model: Optional[Obj] = None
    settings: Optional[Obj] = None
    results: Optional[List[BenchmarkRow]] = None
    consistency: Optional[Consistency] = None
    accuracy: Optional[Accuracy] = None


# -------------------------------------------------------------------------------------------- check.json


class CheckRoute(Record):
    route: Optional[Str] = None
    detail: Optional[Str] = None
    blockers: Optional[Count] = None
    findings: Optional[List[Obj]] = None
    accepted_but_wrong: Optional[List[Any]] = None


class Check(File):
    """``<run>/check/check.json`` and ``deploy check --format json`` (pipeline.check.report)."""

    NAME, VERSION, FILE, WHAT = "check", 2, "check/check.json", "the check report"
    HINT = "run the stage again: deploy run --force check"
    deployable: Optional[Bool] = None
    verdict: Optional[Str] = None
    target: Optional[Obj] = None
    recommended: Optional[Obj] = None
    routes: Optional[List[CheckRoute]] = None
    findings: Optional[List[Any]] = None


# ------------------------------------------------------------------------------------------ rewrite.json


class RewritePass(Record):
    pass_: Optional[Str] = Field(None, alias="pass")
    ops: Optional[Dict[str, Whole]] = None
    sites: Optional[List[Any]] = None
    comparison: Optional[Obj] = None
    changes_behaviour: Optional[Bool] = None


class Rewrite(File):
    """``<run>/rewrite/rewrite.json`` and ``deploy rewrite``'s ``OUT.rewrite.json`` (pipeline.rewrite.command)."""

    NAME, VERSION, FILE, WHAT = "rewrite", 1, "rewrite/rewrite.json", "the rewrite receipt"
    HINT = "run the stage again: deploy run --force rewrite"
    model: Optional[Str] = None
    target: Optional[Str] = None
    passes: Optional[List[RewritePass]] = None
    nodes: Optional[Dict[str, Optional[Count]]] = None
    check_before: Optional[Obj] = None
    check_after: Optional[Obj] = None


# ------------------------------------------------------------------------- convert/comparison.json


class Runtimes(Record):
    reference: Optional[Any] = None
    candidate: Optional[Obj] = None  # the ONNX Runtime session's label: {"runtime", ...}


class Conversion(File):
    """``<run>/convert/comparison.json``: TensorFlow against ONNX Runtime on the same images (convert stage)."""

    NAME, VERSION, FILE, WHAT = "conversion", 1, "convert/comparison.json", "the conversion comparison"
    HINT = "run the stage again: deploy run --force convert"
    max_abs_diff: Optional[Time0] = None
    tolerance: Optional[Time] = None
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
    rows: Optional[List[Obj]] = None
    baseline: Optional[Obj] = None
    current: Optional[Obj] = None
    reference: Optional[Obj] = None
    hardware: Optional[Obj] = None
    tolerance: Optional[Time0] = None
    accuracy_tolerance: Optional[Time0] = None
    k: Optional[Time] = None
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
    build_s: Optional[Time0] = None
    engine_bytes: Optional[Count] = None
    engine_sha256: Optional[Str] = None
    route: Optional[Str] = None
    device: Optional[Obj] = None
    profile: Optional[Dict[str, Dict[str, List[PositiveInt]]]] = None
    dla: Optional[Obj] = None


MODELS = {m.NAME: m for m in (RunRecord, Manifest, Benchmark, Check, Rewrite, Conversion, Comparison, History, Engine)}

