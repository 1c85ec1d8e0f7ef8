"""The verbs of ``deploy``: each parses nothing itself (see ``pipeline.cli``), calls one library
function and prints its result. Heavy modules are imported inside each verb.
"""

import json
import sys

from pipeline.errors import EXIT_BAD_INPUT, EXIT_STAGE_FAILED, DeployError

ALL_STAGES = "__all__"  # --force with no stage


def cmd_run(args):
    """Run the stages of a config: train, export, freeze, check, rewrite, convert, engine, benchmark."""
    from pipeline.config import load_config
    from pipeline.progress import Progress
    from pipeline.runner import format_summary, run

    progress = Progress("json" if args.json else "quiet" if args.quiet else "human")
    config = load_config(args.config, args.set)
    target = config.load_target()
    force = [f for f in (args.force or []) if f != ALL_STAGES]
    progress.log("deploy run {} -> {}/{} (target {})".format(args.config, config.run.dir, config.run.name, target.name))
    report = run(config, target, force=force, force_all=ALL_STAGES in (args.force or []), from_stage=args.from_stage,
                 until=args.until, only=args.only, keep_going=args.keep_going, progress=progress)
    report_path = None if args.no_report else _write_run_report(report.run_dir)
    if args.json:
        progress.event("summary", run_dir=str(report.run_dir), exit_code=report.exit_code,
                       stages=[vars(s) for s in report.stages], report=report_path and str(report_path))
    elif not args.quiet:
        print("\n" + format_summary(report), file=sys.stderr)
        if report_path:
            print("report: {}".format(report_path), file=sys.stderr)
    for s in report.stages:  # the errors last: the line a user (or CI log) reads first
        if s.status == "failed":
            print("deploy: error: stage {}: {}".format(s.name, s.message), file=sys.stderr)
    return report.exit_code


def _write_run_report(run_dir):
    """The HTML report at the end of every run, or None: a report that cannot be written is a warning,
    never a failed run."""
    from pipeline.report import write_report

    try:
        return write_report(run_dir)
    except DeployError as e:
        print("deploy: warning: no report: {}".format(e.message), file=sys.stderr)
        return None


def cmd_report(args):
    """Write a run's report: one self-contained HTML page (or Markdown for a CI job summary)."""
    from pipeline.report import markdown_report, write_report

    if args.format == "markdown":
        text = markdown_report(args.run_dir)
        if args.output:
            _write_or_fail(args.output, text, "-o")
        else:
            sys.stdout.write(text)
        return 0
    path = write_report(args.run_dir, history=args.history or (), output=args.output)
    print(path)
    return 0


def cmd_compare(args):
    """Judge a run against a baseline and the nights' history: latency, throughput, accuracy; noise-aware.
    Exit 4 on a regression, a comparison that is not comparable, or one that compared nothing."""
    import math

    from pipeline.errors import EXIT_DIFFERENT
    from pipeline.report.collect import expand_history, load_run
    from pipeline.report.compare import compare_runs, format_junit, format_markdown, format_text, write_comparison

    if not math.isfinite(args.k):
        raise DeployError("--k {}: must be a finite number above 0".format(args.k))
    baseline, current = load_run(args.baseline), load_run(args.current)
    history = expand_history(args.history or ())
    result = compare_runs(baseline, current, history, tolerance=args.tolerance,
                          accuracy_tolerance=args.accuracy_tolerance, k=args.k, nights=args.nights,
                          expect_change=args.expect_change or ())
    as_json = json.dumps(result, indent=2, sort_keys=True, allow_nan=False)
    text = {"text": format_text, "markdown": format_markdown, "json": lambda r: as_json}[args.format](result)
    print(text)
    if args.junit:
        _write_or_fail(args.junit, format_junit(result), "--junit")
    if args.output:
        write_comparison(args.output, result)  # checked against deploy.comparison/2, what deploy report reads
    return 0 if result["verdict"] == "pass" else EXIT_DIFFERENT


def _write_or_fail(path, text, flag):
    from pipeline.files import write_text

    try:
        write_text(path, text)
    except OSError as e:
        raise DeployError("{} {}: cannot write ({})".format(flag, path, e.strerror or e))


def cmd_check(args):
    """Will this model convert for this Jetson? Offline check against the target's op tables."""
    from pipeline.check import check_model
    from pipeline.check.report import FORMATS, format_junit
    from pipeline.errors import EXIT_NOT_DEPLOYABLE
    from pipeline.files import write_text
    from pipeline.targets import load_target

    from pipeline.check import zoo

    target = load_target(args.target)
    models = args.model if isinstance(args.model, list) else [args.model]
    convert = {"convert": getattr(args, "convert", None), "convert_timeout": getattr(args, "convert_timeout", None)}
    if zoo.is_zoo(models):
        entries = zoo.check_models(models, target, routes=args.route, signature=args.signature, **convert)
        print(zoo.FORMATS[args.format](entries))
        if args.junit:
            _write_or_fail(args.junit, zoo.format_junit(entries), "--junit")
        return zoo.exit_code(entries)
    report = check_model(models[0], target, routes=args.route, signature=args.signature, **convert)
    print(FORMATS[args.format](report))
    if args.junit:
        try:
            write_text(args.junit, format_junit(report))
        except OSError as e:
            raise DeployError("--junit {}: cannot write ({})".format(args.junit, e.strerror or e))
    return 0 if report.deployable else EXIT_NOT_DEPLOYABLE


def cmd_rewrite(args):
    """Make a frozen graph deployable: apply rewrite passes, check the numbers after each, check again."""
    from pipeline.check.report import recommendation
    from pipeline.progress import Progress
    from pipeline.rewrite.command import exit_code, rewrite_model, write_outputs
    from pipeline.targets import load_target

    if not args.passes and not args.auto:
        raise DeployError("deploy rewrite: name passes with --pass NAME (repeatable) or use --auto")
    target = load_target(args.target)
    options = {"bn_inference": {"checkpoint": args.checkpoint} if args.checkpoint else {}}
    if args.input_shape:
        name, _, dims = args.input_shape.rpartition("=")
        options["set_input_shape"] = {"input": name or None, "shape": _dims(dims, "--input-shape")}
    if args.cut:
        options["cut"] = {"inputs": {}}
        for item in args.cut:
            node, _, dims = item.partition("=")
            options["cut"]["inputs"][node] = _dims(dims, "--cut") if dims else None
    from pipeline.rewrite.command import check_output

    progress = Progress("quiet" if args.quiet else "human")
    if str(args.model).endswith(".onnx"):
        return _rewrite_onnx(args, target, progress)
    check_output(args.output)  # before any pass runs
    graph, io, summary, report = rewrite_model(
        args.model, target, args.passes or (), args.auto, options, args.reference, args.dataset, args.samples,
        args.tolerance, progress, args.outputs.split(",") if args.outputs else None)
    write_outputs(graph, io, summary, args.output)
    progress.log("wrote {} ({} -> {} nodes); receipt {}".format(
        args.output, summary["nodes"]["before"], summary["nodes"]["after"], args.output[:-3] + ".rewrite.json"))
    print("after rewrite: {} — {}".format("YES" if report.deployable else "NO", recommendation(report)))
    return exit_code(report)


def _rewrite_onnx(args, target, progress):
    from pipeline.check.report import recommendation
    from pipeline.rewrite.command import exit_code, rewrite_onnx, write_onnx_outputs

    model, summary, report = rewrite_onnx(args.model, target, args.passes or (), args.auto, {}, args.samples,
                                          args.tolerance, progress)
    write_onnx_outputs(model, summary, args.output)
    print("after rewrite: {} — {}".format("YES" if report.deployable else "NO", recommendation(report)))
    return exit_code(report)


def _dims(text, flag):
    try:
        return [None if d in ("?", "-1", "None") else int(d) for d in text.split(",") if d]
    except ValueError:
        raise DeployError("{} {!r}: expected comma-separated dimensions, e.g. 1,224,224,3".format(flag, text))


def cmd_consistency(args):
    """Same image alone and inside batches: do the outputs agree? Names the first layer that diverges."""
    from pipeline.numeric import ATOL
    from pipeline.numeric.consistency import check_model, format_report

    try:
        tolerance = ATOL if args.tolerance is None else args.tolerance
        report = check_model(args.model, args.batch_sizes, args.samples, args.dataset, tolerance,
                             time_limit_s=args.time_limit, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except DeployError as e:
        if args.format != "json":
            raise
        print(json.dumps({"status": "error", "error": e.message, "code": e.code}, indent=2), file=sys.stderr)
        return e.code
    print(json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str) if args.format == "json"
          else format_report(report))
    return 0 if report.passed else EXIT_STAGE_FAILED


def cmd_diff(args):
    """What changed between two graphs, matching nodes by structure (not by creation-order names)."""
    from pipeline.graph.diff import diff_models, format_text

    from pipeline.errors import EXIT_DIFFERENT

    report = diff_models(args.a, args.b, args.signature)
    print(json.dumps(report.to_dict(), indent=2) if args.format == "json" else format_text(report))
    return 0 if report.structurally_identical else EXIT_DIFFERENT


def cmd_unfreeze(args):
    """Turn a frozen graph's weight constants back into variables: a SavedModel that trains in TF2."""
    from pipeline.tf.unfreeze import unfreeze

    result = unfreeze(args.model, args.output, args.trainable_scopes.split(",") if args.trainable_scopes else None)
    print("{}: {} variables, {} trainable ({} ...), input {}, outputs {}".format(
        args.output, len(result["variables"]), len(result["trainable"]), ", ".join(result["variables"][:3]),
        result["inputs"][0], ", ".join(result["outputs"])))
    return 0


def cmd_ckpt_inspect(args):
    """List the variables of a checkpoint, .keras/.weights.h5/.h5 file or frozen graph."""
    from pipeline.train.checkpoints import inspect

    rows = inspect(args.checkpoint)
    width = max([len(name) for name, _, _, _ in rows] + [4])
    print("{:<{w}}  {:<20}  {:<8}  {}".format("name", "shape", "dtype", "size", w=width))
    for name, shape, dtype, size in rows:
        print("{:<{w}}  {:<20}  {:<8}  {}".format(name, str(tuple(shape)), str(dtype), size, w=width))
    print("{} variables, {} values".format(len(rows), sum(r[3] for r in rows)))
    return 0


def cmd_ckpt_diff(args):
    """The restore report of CHECKPOINT into a config's model, without training."""
    from pipeline.config import load_config
    from pipeline.train.restore import config_restore_report, format_report

    report, problem = config_restore_report(load_config(args.config, args.set), args.checkpoint)
    print(format_report(report))
    if problem is not None:  # deploy run would stop here: say what to do, exit 1
        raise problem
    return 0


def cmd_validate(args):
    """Check a config (schema, target, paths) without running anything."""
    from pipeline.config import ConfigError, load_config

    try:
        config = load_config(args.config, args.set)
    except ConfigError as e:
        for problem in e.problems:
            print("deploy: error: " + problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    target = config.load_target()
    problems = config.path_problems()
    for problem in problems:
        print("deploy: error: " + problem, file=sys.stderr)
    if problems:
        return EXIT_BAD_INPUT
    print("{}: ok (run {}, target {}, stages: {})".format(args.config, config.run.name, target.name, ", ".join(config.selected_stages())))
    return 0


def cmd_schema(args):
    """Print the JSON Schema of a config file (point your editor's YAML plugin at it)."""
    from pipeline.config import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=True))
    return 0


def cmd_data_shapes(args):
    """Generate a small deterministic dataset of drawn shapes (4 classes, train/ and val/)."""
    from pipeline.data.shapes import generate_shapes

    summary = generate_shapes(args.dir, image_size=args.size, train_per_class=args.train_per_class,
                              val_per_class=args.val_per_class, seed=args.seed)
    print("{}: {} classes ({}), {} train / {} val images at {}x{}".format(
        args.dir, len(summary["classes"]), ", ".join(summary["classes"]), summary["train"], summary["val"], args.size, args.size))
    return 0


def cmd_targets(args):
    """List the devices deploy knows, or show one."""
    from pipeline.targets import all_targets, describe_target, format_target_list, load_target

    if args.name:
        print(describe_target(load_target(args.name)))
    else:
        print(format_target_list(all_targets()))
    return 0


def cmd_device_probe(args):
    """The device's identity (board, L4T/JetPack, TensorRT, CUDA, power mode, clocks) and the target it matches."""
    from pipeline.config import load_config
    from pipeline.device.identify import format_probe, probe_report
    from pipeline.errors import EXIT_DEVICE

    report = probe_report(load_config(args.config, args.set))
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else format_probe(report))
    # --strict: exit 5 (EXIT_DEVICE, what `deploy run` exits with on a board whose TensorRT is not the target's)
    # when this machine is not the config's target: another board, no Jetson at all, or another TensorRT
    return EXIT_DEVICE if report["not_target"] and args.strict else 0
