"""The config schema (pydantic): every section, key, default and rule of a deployment config."""

import difflib
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pipeline.errors import DeployError
from pipeline.targets.device import RUNNABLE_ROUTES, Route
from pipeline.train.zoo import ZOO


SEED_MAX = 2 ** 32 - 1  # numpy's and TensorFlow's seeds are 32-bit


def _holds_numbers(annotation):
    """Whether a field's type is a number (int or float), alone or inside Optional[...] / List[...]."""
    if annotation in (int, float):
        return True
    if get_origin(annotation) in (Union, list, List):
        return any(_holds_numbers(a) for a in get_args(annotation) if a is not type(None))
    return False


class _Section(BaseModel):
    # nan and inf are refused everywhere: a nan tolerance would pass any comparison
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _booleans_are_not_numbers(cls, v, info):
        # pydantic reads true as 1 and false as 0 for an int or float field: `device.port: true` became port 1,
        # `epochs: yes` one epoch (YAML 1.1 reads yes/no/on/off as booleans too)
        field = cls.model_fields.get(info.field_name)
        values = v if isinstance(v, list) else [v]
        if field is not None and any(isinstance(x, bool) for x in values) and _holds_numbers(field.annotation):
            shown = str(v).lower() if isinstance(v, bool) else "[{}]".format(", ".join(
                str(x).lower() if isinstance(x, bool) else repr(x) for x in v))
            raise ValueError("{} {} a boolean, not a number: give a number (YAML reads true/false, yes/no and on/off "
                             "as booleans)".format(shown, "is" if isinstance(v, bool) else "holds"))
        return v


# ---------------------------------------------------------------------------------- sections


class RunSection(_Section):
    """Where results go: ``<dir>/<name>/<stage>/``."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Run name; the run directory is <dir>/<name>.")
    dir: str = Field("runs", description="Directory holding run directories (relative to the working directory).")


class ModelSection(_Section):
    """The model: a zoo architecture trained by the train stage, or a user's model file."""

    zoo: Optional[Literal[ZOO]] = Field(None, description="Architecture built and trained by deploy.")
    source: Optional[str] = Field(
        None,
        description="A model you already have: .keras/.h5 (skips train), a SavedModel directory "
        "(skips train and export) or a frozen .pb (skips train, export and freeze).",
    )
    input_size: int = Field(96, ge=32, le=1024, description="Input height and width in pixels.")
    alpha: float = Field(1.0, gt=0, le=1.4, description="mobilenet_v2 width multiplier (e.g. 0.35, 0.5, 0.75, 1.0).")
    dropout: float = Field(0.2, ge=0, lt=1, description="Dropout rate before the classifier.")
    num_classes: Optional[int] = Field(None, ge=2, le=100000, description="Number of classes; default: the dataset's.")
    bn_momentum: float = Field(0.9, gt=0, lt=1, description="Batch norm moving-average momentum (0.9 suits short runs).")

    @model_validator(mode="after")
    def _one_source(self):
        if self.zoo is not None and self.source is not None:
            raise ValueError("model.zoo ({}) and model.source are both set; give one: to start from model.source, set "
                             "`zoo: null` under model: (a base config, extends:, may set model.zoo)".format(self.zoo))
        if self.zoo is None and self.source is None:
            raise ValueError("give one of model.zoo (" + ", ".join(ZOO) + ") or model.source (a model file)")
        return self


class DatasetSection(_Section):
    """Images for training, numeric comparisons and benchmarks."""

    path: str = Field(description="Image folder (one subfolder per class, optionally under train/ and val/) or TFRecord glob.")
    format: Literal["folder", "tfrecord"] = Field("folder", description="folder: image files; tfrecord: tf.train.Example records with image/encoded and image/class/label.")
    generate: Optional[Literal["shapes"]] = Field(
        None, description="Generate this synthetic dataset at `path` when it is missing (`deploy data shapes`)."
    )
    train_per_class: int = Field(150, ge=1, le=100000, description="Images per class in train/ when deploy generates the dataset.")
    val_per_class: int = Field(30, ge=0, le=100000, description="Images per class in val/ when deploy generates the dataset.")
    val_split: float = Field(0.2, ge=0, lt=1, description="Fraction held out for validation when there is no val/ folder.")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="Seed of the train/val split and of the generated dataset.")


class DistributeOptions(_Section):
    """tf.distribute: mirrored (the devices of one machine) or multi_worker (machines listed in TF_CONFIG)."""

    strategy: Literal["mirrored", "multi_worker"] = Field(description="tf.distribute strategy.")


class TrainOptions(_Section):
    """Fit the model on the dataset; a checkpoint per epoch."""

    epochs: int = Field(3, ge=1, le=10000, description="Passes over the training set (at most 10,000).")
    batch_size: int = Field(32, ge=1, le=4096, description="Images per training step.")
    learning_rate: float = Field(1e-3, gt=0, description="Optimizer learning rate.")
    optimizer: Literal["adam", "sgd", "rmsprop"] = Field("adam", description="Keras optimizer.")
    augment: bool = Field(False, description="Random left-right flips of training images.")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="Seed of weight initialisation, shuffling and augmentation.")
    run_eagerly: bool = Field(False, description="Run each training step eagerly (Keras's run_eagerly): no tf.function tracing, which costs tens of seconds for a MobileNet on a CPU, but slower steps; for runs of a few steps and for debugging custom layers. Not with distribute.")
    init_from: Optional[str] = Field(None, description="Weights to start from (fine-tuning): a TF2 or TF1 checkpoint, a .keras / .weights.h5 / .h5 file or a frozen .pb; variables are matched by name and shape (deploy ckpt diff shows the report).")
    exclude_scopes: List[str] = Field(default_factory=list, description="Variables under these scopes are not restored (e.g. [probabilities] when the number of classes changes).")
    trainable_scopes: Optional[List[str]] = Field(None, description="Train only variables under these scopes; the rest are frozen (TF-slim's train_image_classifier).")
    distribute: Optional[DistributeOptions] = Field(None, description="Train with tf.distribute; multi_worker reads the cluster from TF_CONFIG (run one deploy per worker).")
    name_map: Dict[str, str] = Field(default_factory=dict, description="Checkpoint name prefix -> model variable prefix, e.g. {MobilenetV2/: mobilenetv2_0.35_96/}.")

    @model_validator(mode="after")
    def _eager_alone(self):
        if self.run_eagerly and self.distribute is not None:
            raise ValueError("run_eagerly is not possible with distribute (its steps are tf.functions): set one of them")
        return self


class ExportOptions(_Section):
    """Rebuild the model for inference (training=False) as a SavedModel."""

    input_name: str = Field("input", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Name of the input tensor in every exported graph.")
    output_name: str = Field("probabilities", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Name of the output tensor.")


class FreezeOptions(_Section):
    """Variables to constants, pruned to the outputs. No options yet."""


class CheckOptions(_Section):
    """Check the frozen graph against the target's op tables (the same check as `deploy check`)."""

    routes: Optional[List[Route]] = Field(None, description="Routes to check; default: every route the target has.")
    on_blockers: Literal["fail", "continue"] = Field("fail", description="fail: stop the run (exit 2) when no route is free of blockers, unless a rewrite stage follows (it must fix them); continue: report and go on.")


class RewriteOptions(_Section):
    """Rewrite the frozen graph until it converts: passes run in order, outputs compared after each."""

    passes: List[str] = Field(default_factory=list, description="Passes to apply in order (deploy rewrite --help lists them).")
    auto: bool = Field(False, description="Also apply every pass deploy check names as a fix, then check again.")
    checkpoint: Optional[str] = Field(None, description="Training checkpoint with batch norm moving statistics (bn_inference).")
    reference: Optional[str] = Field(None, description="Inference-mode frozen graph to compare behaviour-changing passes against.")
    options: Dict[str, Dict[str, Any]] = Field(default_factory=dict, description="Options per pass, e.g. {cut: {inputs: {node: [1, 8, 8, 3]}}}.")
    tolerance: float = Field(1e-4, gt=0, description="Max abs output difference a pass may cause.")
    samples: int = Field(4, ge=1, le=256, description="Images per numeric comparison.")

    @model_validator(mode="after")
    def _known_passes(self):
        from pipeline.rewrite import registry as pass_registry

        registry = pass_registry()
        for name in list(self.passes) + list(self.options):
            if name not in registry:
                close = difflib.get_close_matches(name, list(registry), n=1)
                raise ValueError("unknown rewrite pass {!r}{}; passes: {}".format(
                    name, " (did you mean {!r}?)".format(close[0]) if close else "", ", ".join(sorted(registry))))
        for name, opts in self.options.items():
            unknown = [k for k in opts if k not in registry[name].accepts]
            if unknown:
                raise ValueError("rewrite pass {} has no option {!r}; it takes: {}".format(
                    name, unknown[0], ", ".join(registry[name].accepts) or "no options"))
        return self


class ConvertOptions(_Section):
    """Convert the frozen graph to ONNX (tf2onnx) and compare it with TensorFlow."""

    format: Literal[RUNNABLE_ROUTES + ("auto",)] = Field("onnx", description="The route of the engine stage: onnx (this model.onnx), uff (the frozen graph through NVIDIA's uff converter on the device: TensorRT <= 8, so JetPack 4.x and 5.x; the target files say which have it) or auto (the route deploy check recommends). model.onnx is always made: it is the reference the engine is compared with.")
    opset: Optional[int] = Field(None, ge=7, le=21, description="ONNX opset; default: the highest the target's TensorRT parses.")
    tolerance: float = Field(1e-4, gt=0, description="Max abs difference allowed between TensorFlow and ONNX Runtime outputs.")
    compare_samples: int = Field(16, ge=1, le=1024, description="Dataset images used for the TensorFlow vs ONNX comparison.")


class EngineOptions(_Section):
    """Build a TensorRT engine on the device (pending where the device has no TensorRT)."""

    precision: Literal["fp32", "fp16", "int8"] = Field("fp16", description="Must be one the target supports (deploy targets NAME).")
    workspace_mb: int = Field(1024, ge=16, le=1048576, description="TensorRT builder workspace.")
    max_batch_size: int = Field(8, ge=1, le=1024, description="Largest batch of the engine's optimisation profile (benchmark batch sizes must fit).")
    builder: Literal["python", "trtexec"] = Field("python", description="python: the TensorRT Python API in the device agent; trtexec: NVIDIA's trtexec (its log parsed).")
    dla_core: Optional[int] = Field(None, ge=0, le=1, description="Build for this DLA core with GPU fallback (boards with DLA: Xavier, Orin): precision fp16 or int8, and one static batch size (the benchmark's only batch size, else max_batch_size); engine.json's dla says where the layers ran.")
    calibration_images: int = Field(256, ge=8, le=10000, description="int8: dataset images for the entropy calibrator (preprocessed as at export); the calibration cache is reused.")

    @model_validator(mode="after")
    def _dla_runs_fp16_and_int8(self):
        # NVIDIA, "Working with DLA": DLA runs networks in FP16 and INT8 only
        if self.dla_core is not None and self.precision == "fp32":
            raise ValueError("dla_core {} with precision fp32: DLA runs fp16 and int8 only; set stages.engine.precision: "
                             "fp16 (or int8), or remove dla_core".format(self.dla_core))
        return self


class DeviceSection(_Section):
    """Where the device stages (engine, benchmark) run: the agent on this machine or on a board over SSH."""

    transport: Literal["local", "ssh"] = Field("local", description="local: the agent runs on this machine (a Jetson runner, or the host with ONNX Runtime); ssh: on device.host.")
    host: Optional[str] = Field(None, description="ssh: the board's host name or IP.")
    port: int = Field(22, ge=1, le=65535, description="ssh: the board's sshd port.")
    user: Optional[str] = Field(None, description="ssh: the user on the board (default: ssh's own default).")
    identity_file: Optional[str] = Field(None, description="ssh: private key to log in with (BatchMode: never a password).")
    known_hosts_file: Optional[str] = Field(None, description="ssh: known_hosts file holding the board's host key (default: ssh's own).")
    python: Optional[str] = Field(None, description="The board's Python (3.6+) that runs the agent. Default: /usr/bin/python3 (the board's system Python, which sees JetPack's TensorRT) with transport: local, python3 on the login's PATH with ssh. A relative path (scripts/jetson/agent-in-docker, .venv36/bin/python) counts from the folder of the config file that sets it.")
    work_dir: str = Field("~/.cache/deploy-device", description="The agent's folder on the device: the agent, models sent by content hash, caches.")
    backend: Literal["auto", "tensorrt", "onnxruntime"] = Field("auto", description="auto: TensorRT where the device has it, else ONNX Runtime on the ONNX model.")
    connect_timeout_s: float = Field(10, gt=0, le=300, description="ssh: seconds to wait for a connection.")
    on_version_mismatch: Literal["error", "warn"] = Field("error", description="When the board's TensorRT is not the target file's.")
    power: bool = Field(True, description="Sample tegrastats during the benchmark (power per rail, energy per inference).")

    @field_validator("host", "user")
    @classmethod
    def _not_an_option(cls, v):
        # ssh reads an argument that starts with "-" as an option (deploy also passes "--" before the destination)
        if v is not None and (not v.strip() or v.startswith("-") or any(c.isspace() or ord(c) < 32 for c in v)):
            raise ValueError("{!r}: must be a name without spaces or control characters that does not start with '-' "
                             "(ssh would read it as an option)".format(v))
        return v

    @field_validator("work_dir")
    @classmethod
    def _work_dir_named(cls, v):
        if not v.strip() or "\0" in v:
            raise ValueError("{!r}: give a folder (an empty one would put the agent in the current "
                             "folder); e.g. ~/.cache/deploy-device".format(v))
        return v

    @model_validator(mode="after")
    def _ssh_needs_host(self):
        if self.transport == "ssh" and not self.host:
            raise ValueError("device.transport ssh needs device.host (the board's name or IP)")
        return self


class BenchmarkOptions(_Section):
    """Latency and throughput per batch size: on the device when `device` is set (the engine on TensorRT, else the ONNX model on ONNX Runtime there), otherwise ONNX Runtime's CPU provider on this machine (host numbers, never reported as the target's)."""

    batch_sizes: List[int] = Field(default_factory=lambda: [1, 8], min_length=1, max_length=64, description="Batch sizes to measure (1 to 1024, at most 64 of them).")
    warmup: int = Field(10, ge=0, le=1000000, description="Untimed runs before measuring (at most 1,000,000).")
    iterations: int = Field(100, ge=1, le=1000000, description="Timed runs per batch size (at most 1,000,000).")
    duration_s: Optional[float] = Field(None, gt=0, le=3600, description="Measure for this many seconds per batch size instead of a number of iterations (at most 3600).")
    inputs: Literal["dataset", "random"] = Field("dataset", description="Dataset images (repeated to fill a batch) or seeded random pixels.")
    consistency: bool = Field(True, description="Also check batch consistency: each of `consistency_samples` images alone vs inside batches of the batch sizes above 1 (every position up to 16, 8 sampled positions above); the stage fails when outputs differ.")
    consistency_samples: int = Field(4, ge=1, le=256, description="Images for the batch-consistency check.")
    accuracy_images: int = Field(200, ge=1, le=10000, description="Dataset images the engine is compared with ONNX Runtime on (max abs difference, top-1 agreement): at 200 one image is 0.5 % of the agreement, so deploy compare's accuracy tolerance (0.02) decides, not a single flip.")

    @field_validator("batch_sizes")
    @classmethod
    def _positive(cls, v):
        if any(b < 1 or b > 1024 for b in v):
            raise ValueError("batch sizes must be 1 to 1024 (each batch is held in memory several times)")
        return v


class Stages(_Section):
    """Stages to run, in pipeline order. A stage listed with no options uses the defaults."""

    train: Optional[TrainOptions] = None
    export: Optional[ExportOptions] = None
    freeze: Optional[FreezeOptions] = None
    check: Optional[CheckOptions] = None
    rewrite: Optional[RewriteOptions] = None
    convert: Optional[ConvertOptions] = None
    engine: Optional[EngineOptions] = None
    benchmark: Optional[BenchmarkOptions] = None

    @model_validator(mode="after")
    def _dla_has_one_batch_size(self):
        # DLA has no dynamic shapes: a DLA engine is built for one static batch size (pipeline/device/engine.py)
        engine, bench = self.engine, self.benchmark
        if engine is not None and engine.dla_core is not None and bench is not None and len(set(bench.batch_sizes)) > 1:
            raise ValueError("a DLA engine (stages.engine.dla_core: {}) has one static batch size, but "
                             "stages.benchmark.batch_sizes has {}; benchmark one batch size on DLA (e.g. "
                             "stages.benchmark.batch_sizes: [{}]) or remove dla_core".format(
                                 engine.dla_core, sorted(set(bench.batch_sizes)), max(bench.batch_sizes)))
        return self

    @model_validator(mode="after")
    def _benchmark_fits_the_engine(self):
        # the engine's optimisation profile runs batch 1 .. max_batch_size (pipeline/device/engine.py profile_for)
        engine, bench = self.engine, self.benchmark
        if engine is not None and bench is not None and bench.batch_sizes and max(bench.batch_sizes) > engine.max_batch_size:
            raise ValueError("stages.benchmark.batch_sizes has {} but stages.engine.max_batch_size is {}: the engine's "
                             "profile must cover every benchmarked batch; raise max_batch_size to {} or benchmark smaller "
                             "batches".format(max(bench.batch_sizes), engine.max_batch_size, max(bench.batch_sizes)))
        return self

    @model_validator(mode="before")
    @classmethod
    def _empty_means_defaults(cls, data):
        # `export:` with nothing after it means "run it with the defaults".
        if isinstance(data, dict):
            return {k: ({} if v is None else v) for k, v in data.items()}
        return data


class Config(_Section):
    run: RunSection = Field(description="Run name and where its results go.")
    model: ModelSection = Field(description="The model to deploy.")
    dataset: Optional[DatasetSection] = Field(None, description="Images for training, comparisons and benchmarks.")
    target: str = Field(description="A device file in targets/ (see `deploy targets`).")
    device: Optional[DeviceSection] = Field(None, description="Where engine and benchmark run (default: benchmark in this process on ONNX Runtime, engine pending).")
    stages: Stages = Field(description="The stages to run and their options.")

    # Where the config came from (not part of the schema).
    _path: Optional[Path] = None
    _source: Optional[object] = None
    _overrides: tuple = ()  # the --set KEY=VALUE texts it was loaded with (run.json keeps them: the report's next command)

    @property
    def path(self):
        return self._path

    def where(self, *keypath):
        """``file:line`` of a key path, for error messages."""
        return self._source.locate(tuple(keypath)) if self._source else str(self._path)

    def load_target(self):
        """The validated target this config names; an error points at the config's line (``target:``,
        ``stages.engine.precision``, ``stages.convert.format`` or ``.opset``) that the target cannot serve."""
        from pipeline.config.target_fit import target_problems

        engine, convert = self.stages.engine, self.stages.convert
        target, problems = target_problems(self.target, engine.precision if engine else None,
                                           convert.format if convert else None, convert.opset if convert else None,
                                           self.where, engine.dla_core if engine else None)
        if problems:
            raise DeployError(problems[0])
        return target

    def path_problems(self):
        """One line per path the config names that is not there (relative paths count from the
        current directory, as deploy run reads them): model.source, stages.train.init_from, and
        dataset.path unless deploy generates it."""
        import glob

        from pipeline.train.fit import check_init_from

        problems = []
        if self.model.source is not None:
            from pipeline.files import SOURCE_KINDS, source_problem

            problem = source_problem(self.model.source)
            if problem == "not found":
                problem += "; give " + SOURCE_KINDS
            if problem:
                problems.append("{} model.source: {} {}".format(self.where("model", "source"), self.model.source,
                                                                problem))
        train = self.stages.train
        if train is not None:
            try:
                check_init_from(train.init_from, self.where("stages", "train", "init_from"))
            except DeployError as e:
                problems.append(e.message)
        ds = self.dataset
        if ds is not None and ds.generate is None:
            missing = not glob.glob(ds.path) if ds.format == "tfrecord" else not Path(ds.path).exists()
            if missing:
                problems.append("{} dataset.path: {} {}; point it at the dataset, or set dataset.generate: shapes".format(
                    self.where("dataset", "path"), ds.path,
                    "matches no TFRecord file" if ds.format == "tfrecord" else "not found"))
        return problems

    def selected_stages(self):
        """Names of the stages the config lists, in pipeline order (``pipeline.stages.pipeline_order``)."""
        from pipeline.stages import pipeline_order

        return [name for name in pipeline_order() if getattr(self.stages, name) is not None]


def json_schema():
    """The JSON Schema of a config file (for editors)."""
    schema = Config.model_json_schema()
    schema["properties"]["extends"] = {"type": "string", "description": "A base config this one extends (relative path)."}
    schema["title"] = "deploy config"
    return schema
