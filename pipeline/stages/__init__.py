"""Stages: functions from input artifacts and a config section to output artifacts.

A stage declares what it reads and writes; the runner (``pipeline.runner``) owns the rest:
the cache key, the temporary directory renamed into place, the manifest and the lock.

    @stage("freeze", inputs={"saved_model": "export"}, outputs={"frozen_graph": "frozen.pb"}, tools=("tensorflow",))
    def freeze(ctx):
        ...write ctx.out_dir / "frozen.pb"...
        return {"nodes": 123}          # key results, stored in manifest.json

Stage modules import TensorFlow, tf2onnx, onnxruntime... inside their functions only, and name
them in ``tools``: their installed versions join the stage's cache key.

The pipeline order is not written down: ``pipeline_order()`` derives it from the declared inputs (a stage
runs after every stage it reads from), ties broken by the order of ``_MODULES``. The ties carry meaning
the inputs do not say: check, rewrite and convert all read freeze's ``frozen_graph``, but rewrite writes
a new one that convert (and engine) get in its place, while check judges the graph before rewrite.
"""

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from pipeline.errors import DeployError
from pipeline.files import SOURCE_SUFFIXES, source_problem

# Modules that register stages, imported lazily by ``registry()``, in pipeline order: where the declared
# inputs leave two stages unordered, the one whose module comes first here runs first.
_MODULES = (
    "pipeline.stages.train",
    "pipeline.stages.export",
    "pipeline.stages.freeze",
    "pipeline.stages.check",
    "pipeline.stages.rewrite",
    "pipeline.stages.convert",
    "pipeline.stages.engine",
    "pipeline.stages.benchmark",
)


@dataclass
class Stage:
    name: str
    func: Callable[["StageContext"], Dict[str, Any]]
    # artifact name -> name of the stage that produces it
    inputs: Dict[str, str]
    # artifact name -> file or directory name inside the stage's output directory
    outputs: Dict[str, str]
    # bump when the stage's code changes what it writes: invalidates cached results
    version: int = 1
    # top-level config sections (besides stages.<name>) that change the stage's result
    uses: tuple = ()
    # optional: returns a reason string when the stage cannot run on this machine (-> pending)
    pending_reason: Optional[Callable[["StageContext"], Optional[str]]] = None
    doc: str = ""
    # the tools whose versions join the cache key (package names; "tensorflow" is either TF package)
    tools: tuple = ()
    # the runner pauses Python's cyclic GC while the stage runs (False: long loops, e.g. training)
    pause_gc: bool = True
    # inputs the stage runs without when their stage is pending (benchmark: the engine)
    optional: tuple = ()


@dataclass
class StageContext:
    """What a stage function gets. It writes its outputs into ``out_dir`` only."""

    name: str
    out_dir: Path
    inputs: Dict[str, Path]  # artifact name -> path (file or directory)
    options: Any  # this stage's validated config section (a pydantic model)
    config: Any  # the whole validated config (pipeline.config.Config)
    target: Any  # the validated target (pipeline.targets.Target)
    progress: Any  # pipeline.progress.Progress
    run_dir: Path = field(default=None)

    def output(self, artifact):
        """Path of one of this stage's declared outputs inside ``out_dir``."""
        return self.out_dir / _REGISTRY[self.name].outputs[artifact]


_REGISTRY: Dict[str, Stage] = {}


def stage(name, inputs=None, outputs=None, version=1, uses=(), pending_reason=None, tools=(), pause_gc=True, optional=()):
    """Register a stage function under ``name``."""

    def register(func):
        _check_declaration(name, inputs or {}, optional)
        _REGISTRY[name] = Stage(
            name=name,
            func=func,
            inputs=dict(inputs or {}),
            outputs=dict(outputs or {}),
            version=version,
            uses=tuple(uses),
            pending_reason=pending_reason,
            doc=(func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else "",
            tools=tuple(tools),
            pause_gc=pause_gc,
            optional=tuple(optional),
        )
        return func

    return register


def registry():
    """All registered stages by name (imports the stage modules, which import nothing heavy)."""
    for module in _MODULES:
        importlib.import_module(module)
    return _REGISTRY


def pipeline_order(stages=None):
    """The names of ``stages`` (default: ``registry()``) in the order they run: each after the stages it
    reads from, ties broken by the order of ``_MODULES``, then by registration. A config lists the stages
    it runs; they always run in this order. An input naming no stage, or an artifact its stage does not
    write, or stages reading from each other in a circle, is a ValueError (a bug in the declarations)."""
    stages = registry() if stages is None else stages
    for reader in stages.values():
        for artifact, producer in reader.inputs.items():
            if producer not in stages:
                raise ValueError("stage '{}' reads '{}' from stage '{}', which is not a stage (stages: {})".format(
                    reader.name, artifact, producer, ", ".join(stages)))
            if artifact not in stages[producer].outputs:
                raise ValueError("stage '{}' reads '{}' from stage '{}', which does not write it ({} writes: {})".format(
                    reader.name, artifact, producer, producer, ", ".join(stages[producer].outputs) or "nothing"))
    rank = {name: (_module_rank(s.func), i) for i, (name, s) in enumerate(stages.items())}
    waiting = {name: set(s.inputs.values()) for name, s in stages.items()}
    order = []
    while waiting:
        ready = [name for name, needs in waiting.items() if not needs]
        if not ready:
            raise ValueError("stages read each other's outputs in a circle: {}".format(_circle(stages, waiting)))
        first = min(ready, key=rank.__getitem__)
        order.append(first)
        del waiting[first]
        for needs in waiting.values():
            needs.discard(first)
    return tuple(order)


def _module_rank(func):
    module = getattr(func, "__module__", None)
    return _MODULES.index(module) if module in _MODULES else len(_MODULES)


def _circle(stages, waiting):
    """One circle among the ``waiting`` stages, in words: a reads x from b, b reads y from a."""
    path, name = [], min(waiting)
    while name not in path:
        path.append(name)
        name = min(p for p in waiting[name] if p in waiting)
    path = path[path.index(name):] + [name]
    return ", ".join("{} reads {} from {}".format(a, _artifact_from(stages[a], b), b) for a, b in zip(path, path[1:]))


def _artifact_from(reader, producer):
    return "/".join(a for a, p in reader.inputs.items() if p == producer)


def _check_declaration(name, inputs, optional):
    """What one ``@stage`` declaration can get wrong on its own (the rest: ``pipeline_order``)."""
    if name in inputs.values():
        raise ValueError("stage '{}' reads {} from itself".format(
            name, ", ".join(a for a, p in inputs.items() if p == name)))
    stray = [a for a in optional if a not in inputs]
    if stray:
        raise ValueError("stage '{}': optional names {}, which it does not read (inputs: {})".format(
            name, ", ".join(stray), ", ".join(inputs) or "none"))


def source_artifacts(config):
    """Artifacts given by ``model.source`` (the stages that would make them are skipped)."""
    source = config.model.source
    if source is None:
        return {}
    problem = source_problem(source)
    if problem:
        where = config.where("model", "source") if hasattr(config, "where") else None
        raise DeployError("{}model.source: {} {}".format(where + " " if where else "", source, problem))
    path = Path(source)
    if path.is_dir():
        return {"saved_model": path}
    kind = SOURCE_SUFFIXES[path.suffix.lower()]
    train = config.stages.train
    if kind == "keras_model" and train is not None and train.init_from:
        return {}  # the train stage fine-tunes this model from init_from (pipeline.train.restore.config_model)
    return {kind: path}
