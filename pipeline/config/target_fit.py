"""What a config asks of its target, checked against the target file: used by ``deploy validate`` (every
problem, one line each) and by ``Config.load_target`` (the first problem stops the run)."""

from pipeline.errors import DeployError


def target_problems(name, precision=None, convert_format=None, opset=None, where=str, dla_core=None):
    """(the target, every problem of it with the settings a config asks of it), one line each: an unknown
    target, a precision it does not support, the UFF route where it has none, an opset above its parser's, a DLA
    core it does not have.
    ``where(*keypath)``: ``file:line`` of a key. Values of the wrong type are the schema's to report."""
    from pipeline.targets import load_target

    if not isinstance(name, str):
        return None, []
    try:
        target = load_target(name)
    except DeployError as e:
        return None, ["{} target: {}".format(where("target"), e.message)]
    problems = []
    runtime = "TensorRT " + target.tensorrt if target.tensorrt else target.runtime
    if isinstance(precision, str) and not target.supports_precision(precision):
        problems.append("{} stages.engine.precision: {} is not supported on {} (it has {})".format(
            where("stages", "engine", "precision"), precision, target.name, ", ".join(target.precisions)))
    if convert_format == "uff" and "uff" not in target.routes:
        problems.append("{} stages.convert.format: uff: {} has no UFF route (UFF needs TensorRT <= 8; {} has {}); "
                        "use onnx".format(where("stages", "convert", "format"), target.name, target.name, runtime))
    if isinstance(opset, int) and not isinstance(opset, bool) and not target.supports_opset(opset):
        problems.append("{} stages.convert.opset: {} is above what {} on {} parses (max {}); leave it unset".format(
            where("stages", "convert", "opset"), opset, runtime, target.name, target.max_opset))
    if isinstance(dla_core, int) and not isinstance(dla_core, bool) and dla_core >= (target.dla_cores or 0):
        problems.append("{} stages.engine.dla_core: {}: {} has {} DLA core{}; {}".format(
            where("stages", "engine", "dla_core"), dla_core, target.name, target.dla_cores or "no",
            "" if target.dla_cores == 1 else "s", "remove dla_core" if not target.dla_cores else
            "use dla_core 0 to {}".format(target.dla_cores - 1)))
    return target, problems
