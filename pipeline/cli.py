"""deploy: take a TensorFlow model from training to a TensorRT engine on an NVIDIA Jetson.

The command line is a thin layer: each verb parses its flags and calls one library function.
Nothing heavy is imported here, so ``deploy --help`` and ``deploy validate`` start fast.
"""

import argparse
import json
import sys

from pipeline.errors import EXIT_BAD_INPUT, EXIT_STAGE_FAILED, DeployError

_ALL = "__all__"


def cmd_run(args):
    """Run the stages of a config: train, export, freeze, check, rewrite, convert, engine, benchmark."""
    from pipeline.config import load_config
    from pipeline.progress import Progress
    from pipeline.runner import format_summary, run

    progress = Progress("json" if args.json else "quiet" if args.quiet else "human")
    config = load_config(args.config, args.set)
    target = config.load_target()
    force = [f for f in (args.force or []) if f != _ALL]
    progress.log("deploy run {} -> {}/{} (target {})".format(args.config, config.run.dir, config.run.name, target.name))
    report = run(config, target, force=force, force_all=_ALL in (args.force or []), from_stage=args.from_stage,
                 until=args.until, only=args.only, keep_going=args.keep_going, progress=progress)
    if args.json:
        progress.event("summary", run_dir=str(report.run_dir), exit_code=report.exit_code,
                       stages=[vars(s) for s in report.stages])
    elif not args.quiet:
        print("\n" + format_summary(report), file=sys.stderr)
    for s in report.stages:
        if s.status == "failed":
            print("deploy: error: stage {}: {}".format(s.name, s.message), file=sys.stderr)
    return report.exit_code


def cmd_check(args):
    """Will this model convert for this Jetson? Offline check against the target's op tables."""
    from pipeline.check import check_model
    from pipeline.check.report import FORMATS, format_junit
    from pipeline.errors import EXIT_NOT_DEPLOYABLE
    from pipeline.files import write_text
    from pipeline.targets import load_target

    target = load_target(args.target)
    report = check_model(args.model, target, routes=args.route, signature=args.signature)
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
        try:
            sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
        except ValueError as e:
            raise DeployError("bad --batch-sizes ({}); e.g. --batch-sizes 2,8".format(e)) from None
        tolerance = ATOL if args.tolerance is None else args.tolerance
        report = check_model(args.model, sizes, args.samples, args.dataset, tolerance)
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


def _lazy_help(action, make):
    """Give ``action`` a help text made only when help is shown (``make`` may import heavy modules)."""
    action.__class__ = type(type(action).__name__, (type(action),), {"help": property(lambda self: make())})
    return action


def _pass_help():
    from pipeline.rewrite import KINDS, registry

    return "a pass to apply, in order (repeatable). " + ". ".join(
        "{}: {}".format(KINDS[kind].split()[0], ", ".join(registry(kind))) for kind in KINDS)


def _count(text):
    """argparse type: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a whole number".format(text))
    if value < 1:
        raise argparse.ArgumentTypeError("{} must be 1 or more".format(value))
    return value


def _tolerance(text):
    """argparse type: a finite number of 0 or more (a nan tolerance would pass any comparison)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a number".format(text))
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError("{} must be a finite number of 0 or more".format(text))
    return value


def _doc(func):
    return func.__doc__.strip().splitlines()[0]


def build_parser():
    from pipeline import __version__

    parser = _Parser(
        prog="deploy",
        description=__doc__.strip().splitlines()[0],
        epilog="Exit codes: 0 success, 1 bad input or config, 2 model not deployable to the target, 3 a stage failed.",
    )
    parser.add_argument("--version", action="version", version="deploy " + __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name, func):
        p = sub.add_parser(name, help=_doc(func), description=_doc(func))
        p.set_defaults(func=func)
        return p

    def add_set(p):
        p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                       help="override a config key, e.g. --set stages.train.epochs=1 (repeatable)")

    def add_trust(p):
        p.add_argument("--trust-model", action="store_true",
                       help="run graphs even when they hold ops that act outside the graph (file, Python, checkpoint, "
                            "queue ops): only for files you trust")

    p = add("run", cmd_run)
    p.add_argument("config", help="the YAML config, e.g. configs/jetson_tx2.yaml")
    add_set(p)
    p.add_argument("--force", nargs="?", const=_ALL, action="append", metavar="STAGE",
                   help="rerun STAGE even if cached (all stages when no STAGE is given; repeatable)")
    p.add_argument("--from", dest="from_stage", metavar="STAGE", help="start at STAGE (earlier stages must be cached)")
    p.add_argument("--until", metavar="STAGE", help="stop after STAGE")
    p.add_argument("--only", metavar="STAGE", help="run STAGE alone (earlier stages must be cached)")
    p.add_argument("--keep-going", action="store_true", help="after a failed stage, run the stages that do not depend on it")
    add_trust(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    out.add_argument("--json", action="store_true", help="machine-readable events, one JSON object per line on stdout")

    p = add("check", cmd_check)
    p.add_argument("model", help="frozen .pb/.pbtxt, SavedModel directory, .keras/.h5, TF1 .meta or .onnx")
    p.add_argument("--target", "-t", required=True, help="a target name (deploy targets) or a target .yaml file")
    p.add_argument("--route", action="append", choices=("uff", "onnx", "tftrt"),
                   help="check only this route (repeatable; default: every route the target has)")
    p.add_argument("--format", default="text", choices=("text", "json", "markdown"), help="report format (default text)")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report for CI")
    p.add_argument("--signature", default="serving_default", help="SavedModel signature to check (default serving_default)")

    p = add("rewrite", cmd_rewrite)
    p.add_argument("model", help="a frozen TensorFlow graph (.pb/.pbtxt) or an .onnx model")
    p.add_argument("--target", "-t", required=True, help="the target the graph must convert for")
    p.add_argument("--output", "-o", required=True, help="where to write the rewritten graph (*.pb); "
                   "*.io.json and *.rewrite.json (the receipt) go beside it")
    _lazy_help(p.add_argument("--pass", dest="passes", action="append", metavar="NAME"), _pass_help)
    p.add_argument("--auto", action="store_true", help="apply every pass deploy check names as a fix, check again, repeat")
    p.add_argument("--checkpoint", help="training checkpoint holding batch norm moving statistics (bn_inference)")
    p.add_argument("--reference", help="an inference-mode frozen graph to compare behaviour-changing passes against")
    p.add_argument("--dataset", help="image folder for the numeric checks (default: seeded random pixels)")
    p.add_argument("--samples", type=_count, default=4, help="images per numeric check (default 4)")
    p.add_argument("--tolerance", type=_tolerance, default=1e-4, help="max abs difference allowed (default 1e-4)")
    p.add_argument("--input-shape", metavar="[INPUT=]DIMS", help="set_input_shape option, e.g. input=1,224,224,3")
    p.add_argument("--cut", action="append", metavar="NODE[=DIMS]", help="cut option: make NODE a new input (repeatable)")
    p.add_argument("--outputs", metavar="NODE,...", help="the graph's outputs (default: MODEL's .io.json, else its sink nodes)")
    p.add_argument("--quiet", "-q", action="store_true")
    add_trust(p)

    p = add("consistency", cmd_consistency)
    p.add_argument("model", help="a frozen TensorFlow graph (.pb/.pbtxt) or an .onnx model")
    p.add_argument("--batch-sizes", default="2,8", help="batch sizes to place each image in (default 2,8)")
    p.add_argument("--samples", type=_count, default=4, help="images to test (default 4)")
    p.add_argument("--dataset", help="image folder to take them from (default: seeded random pixels)")
    p.add_argument("--tolerance", type=_tolerance, help="max abs difference (default 1e-5, plus 1e-4 relative)")
    p.add_argument("--format", default="text", choices=("text", "json"))
    add_trust(p)

    p = add("diff", cmd_diff)
    p.add_argument("a", help="a frozen .pb/.pbtxt, SavedModel directory, .keras/.h5, TF1 .meta or .onnx")
    p.add_argument("b", help="the model to compare it with (same kind); exit 0: same structure, 4: different")
    p.add_argument("--format", default="text", choices=("text", "json"))
    p.add_argument("--signature", default="serving_default", help="SavedModel signature (default serving_default)")

    p = add("unfreeze", cmd_unfreeze)
    p.add_argument("model", help="a frozen graph (.pb/.pbtxt); its io.json beside it names inputs and outputs")
    p.add_argument("--output", "-o", required=True, help="the SavedModel directory to write (must not exist)")
    p.add_argument("--trainable-scopes", metavar="SCOPE,...", help="only weights under these name scopes become variables")
    add_trust(p)

    p = add("validate", cmd_validate)
    p.add_argument("config")
    add_set(p)

    add("schema", cmd_schema)

    p = add("targets", cmd_targets)
    p.add_argument("name", nargs="?", help="a target name, e.g. jetson_tx2")

    ckpt = sub.add_parser("ckpt", help="inspect checkpoints and restore reports", description="Checkpoints.")
    ckpt_sub = ckpt.add_subparsers(dest="ckpt_command", metavar="ACTION")
    p = ckpt_sub.add_parser("inspect", help=_doc(cmd_ckpt_inspect), description=_doc(cmd_ckpt_inspect))
    p.set_defaults(func=cmd_ckpt_inspect)
    p.add_argument("checkpoint")
    p = ckpt_sub.add_parser("diff", help=_doc(cmd_ckpt_diff), description=_doc(cmd_ckpt_diff))
    p.set_defaults(func=cmd_ckpt_diff)
    p.add_argument("checkpoint")
    p.add_argument("--config", required=True, help="the config whose model (and stages.train scopes) to restore into")
    add_set(p)
    ckpt.set_defaults(func=lambda args: _usage(ckpt))

    data = sub.add_parser("data", help="make datasets", description="Make datasets.")
    data_sub = data.add_subparsers(dest="data_command", metavar="KIND")
    p = data_sub.add_parser("shapes", help=_doc(cmd_data_shapes), description=_doc(cmd_data_shapes))
    p.set_defaults(func=cmd_data_shapes)
    p.add_argument("dir", help="where to write it (must not exist or be empty)")
    p.add_argument("--size", type=_count, default=96, help="image size in pixels (default 96)")
    p.add_argument("--train-per-class", type=_count, default=60, help="training images per class (default 60)")
    p.add_argument("--val-per-class", type=int, default=20, help="validation images per class (default 20)")
    p.add_argument("--seed", type=int, default=0)
    data.set_defaults(func=lambda args: _usage(data))
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, but its own errors (unknown flag, missing argument, bad choice) are one line with
    exit code 1 (bad input), like every other error: argparse's default is usage text and exit 2,
    which deploy documents as "not deployable". Sub-parsers are made with the same class."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, "deploy: error: {} (see: {} --help)\n".format(message, self.prog))


class _ClosedPipeSafe:
    """stdout that survives a reader going away (``deploy diff A B | head``): the rest of the output
    is dropped and the command still returns its own exit code (a closed pipe never turns a
    non-zero result into 0)."""

    def __init__(self, stream):
        self._stream = stream

    def _closed(self):
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: the same clean-up (temporary stage folders removed, lock
    released, child processes killed), then exit code 143."""


def _on_sigterm():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)


def _usage(parser):
    parser.print_help(sys.stderr)
    return EXIT_BAD_INPUT


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        return _usage(parser)
    if getattr(args, "trust_model", False):
        import os

        from pipeline.tf.screen import TRUST_ENV

        os.environ[TRUST_ENV] = "1"  # read where graphs are run, in this process and its children
    _on_sigterm()
    stdout = sys.stdout
    sys.stdout = _ClosedPipeSafe(stdout)
    try:
        return args.func(args)
    except DeployError as e:
        if getattr(args, "json", False):
            print(json.dumps({"event": "error", "message": e.message, "code": e.code}), flush=True)
        print("deploy: error: " + e.message.splitlines()[0] + _more(e), file=sys.stderr)
        return e.code
    except _Terminated:
        print("deploy: terminated (SIGTERM); unfinished stages left nothing behind", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("deploy: interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        sys.stdout = stdout


def _more(error):
    extra = len(getattr(error, "problems", ())) - 1
    return " (and {} more problem{}: deploy validate shows all)".format(extra, "s" if extra > 1 else "") if extra > 0 else ""


if __name__ == "__main__":
    sys.exit(main())
