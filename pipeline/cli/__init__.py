"""deploy: take a TensorFlow model from training to a TensorRT engine on an NVIDIA Jetson.

The command line is a thin layer: each verb parses its flags and calls one library function.
Nothing heavy is imported here, so ``deploy --help`` and ``deploy validate`` start fast. The
parser and ``main`` (exit codes, SIGTERM, a closed stdout) are here; the verbs in ``commands``.
"""

import argparse
import json
import sys

from pipeline.cli.commands import (
    ALL_STAGES, cmd_check, cmd_ckpt_diff, cmd_ckpt_inspect, cmd_compare, cmd_consistency, cmd_data_shapes, cmd_diff,
    cmd_device_probe, cmd_report, cmd_rewrite, cmd_run, cmd_schema, cmd_targets, cmd_unfreeze, cmd_validate,
)
from pipeline.errors import EXIT_BAD_INPUT, DeployError

def _lazy_help(action, make):
    """Give ``action`` a help text made only when help is shown (``make`` may import heavy modules)."""
    action.__class__ = type(type(action).__name__, (type(action),), {"help": property(lambda self: make())})
    return action


def _pass_help():
    from pipeline.rewrite import KINDS, registry

    return "a pass to apply, in order (repeatable). " + ". ".join(
        "{}: {}".format(KINDS[kind].split()[0], ", ".join(registry(kind))) for kind in KINDS)


def _fraction(text):
    """argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a number".format(text))
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("{} must be between 0 and 1 (0.05 is 5 %)".format(value))
    return value


def _positive(text):
    """argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a number".format(text))
    if not value > 0:
        raise argparse.ArgumentTypeError("{} must be above 0".format(value))
    return value


def _count(text):
    """argparse type: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a whole number".format(text))
    if value < 1:
        raise argparse.ArgumentTypeError("{} must be 1 or more".format(value))
    return value


def _batch_sizes(text):
    """argparse type: comma-separated whole numbers of 2 or more (batch sizes an image is placed in)."""
    sizes = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            sizes.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError("{!r} is not a whole number (e.g. --batch-sizes 2,8)".format(part))
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError("{!r}: batch sizes must be 2 or more (e.g. --batch-sizes 2,8)".format(text))
    return sizes


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
        epilog="Exit codes: 0 success, 1 bad input or config, 2 model not deployable to the target, 3 a stage failed, "
               "4 a comparison found a difference, 5 the device could not be reached or used.",
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
    p.add_argument("--force", nargs="?", const=ALL_STAGES, action="append", metavar="STAGE",
                   help="rerun STAGE even if cached (all stages when no STAGE is given; repeatable)")
    p.add_argument("--from", dest="from_stage", metavar="STAGE", help="start at STAGE (earlier stages must be cached)")
    p.add_argument("--until", metavar="STAGE", help="stop after STAGE")
    p.add_argument("--only", metavar="STAGE", help="run STAGE alone (earlier stages must be cached)")
    p.add_argument("--keep-going", action="store_true", help="after a failed stage, run the stages that do not depend on it")
    p.add_argument("--no-report", action="store_true", help="do not write <run dir>/report.html at the end")
    add_trust(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    out.add_argument("--json", action="store_true", help="machine-readable events, one JSON object per line on stdout")

    p = add("check", cmd_check)
    p.add_argument("model", nargs="+", help="frozen .pb/.pbtxt, SavedModel directory, .keras/.h5, TF1 .meta or .onnx; "
                   "several, or a folder (every model in it): one verdict each, then a summary table, exit code the "
                   "worst (1 unreadable > 2 NO > 0)")
    p.add_argument("--target", "-t", required=True, help="a target name (deploy targets) or a target .yaml file")
    p.add_argument("--route", action="append", choices=("uff", "onnx", "tftrt"),
                   help="check only this route (repeatable; default: every route the target has)")
    p.add_argument("--format", default="text", choices=("text", "json", "markdown"), help="report format (default text)")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report for CI")
    p.add_argument("--signature", default="serving_default", help="SavedModel signature to check (default serving_default)")
    p.add_argument("--no-convert", dest="convert", action="store_false", default=None,
                   help="predict the onnx route from the tables only; do not run tf2onnx on a frozen graph "
                        "(the report says \"predicted, tf2onnx not run\")")
    p.add_argument("--convert-timeout", type=_positive, metavar="SECONDS",
                   help="time limit of the tf2onnx subprocess (default: $DEPLOY_CHECK_CONVERT_TIMEOUT, else 120)")
    add_trust(p)  # a Keras Lambda layer's Python code is loaded (and traced) only with it

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
    p.add_argument("--batch-sizes", type=_batch_sizes, default=[2, 8],
                   help="batch sizes to place each image in (default 2,8); above 16, 8 positions are sampled")
    p.add_argument("--time-limit", type=_positive, default=600, metavar="SECONDS",
                   help="refuse a check estimated to take longer (default 600; estimated from a timed first batch)")
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

    p = add("report", cmd_report)
    p.add_argument("run_dir", help="a run folder, runs/<run name>")
    p.add_argument("--history", nargs="+", metavar="DIR", help="earlier runs (run folders, or folders of them) for trend plots")
    p.add_argument("--format", default="html", choices=("html", "markdown"), help="html (default) or markdown (CI job summary)")
    p.add_argument("--output", "-o", metavar="FILE", help="where to write it (default RUN_DIR/report.html; markdown: stdout)")

    p = add("compare", cmd_compare)
    p.add_argument("baseline", help="the baseline run folder (chosen by you; a failed run is never a reference)")
    p.add_argument("current", help="the run folder to judge")
    p.add_argument("--history", nargs="+", metavar="DIR", help="earlier nights (run folders, or folders of them): the "
                   "reference is the median of the baseline and the last nights on its fingerprint, the band their spread")
    p.add_argument("--nights", type=_count, default=20, help="how many nights make the reference, the baseline included "
                   "(default 20)")
    p.add_argument("--expect-change", action="append", default=[], metavar="KEY",
                   choices=("kind", "board", "gpu", "jetpack", "tensorrt", "runtime", "power_mode", "clocks"),
                   help="a fingerprint key whose change is intended (repeatable): compared anyway instead of "
                   "'not comparable'")
    p.add_argument("--tolerance", type=_fraction, default=0.03, help="relative change in latency and throughput "
                   "that is never a regression (default 0.03)")
    p.add_argument("--accuracy-tolerance", type=_fraction, default=0.02, help="absolute drop allowed in engine top-1 "
                   "agreement, at least one image (default 0.02)")
    p.add_argument("--k", type=_positive, default=2.0, help="noise band width in standard deviations of the "
                   "nights (default 2)")
    p.add_argument("--format", default="text", choices=("text", "json", "markdown"))
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML file, one test case per figure")
    p.add_argument("--output", "-o", metavar="FILE", help="also write the comparison as JSON (schema "
                   "deploy.comparison/2), e.g. RUN/comparison.json for deploy report")

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

    device = sub.add_parser("device", help="talk to the device of a config", description="The device (config's device:).")
    device_sub = device.add_subparsers(dest="device_command", metavar="ACTION")
    p = device_sub.add_parser("probe", help=_doc(cmd_device_probe), description=_doc(cmd_device_probe))
    p.set_defaults(func=cmd_device_probe)
    p.add_argument("config", help="the YAML config whose device: section to use")
    add_set(p)
    p.add_argument("--json", action="store_true", help="print the whole probe as JSON")
    p.add_argument("--strict", action="store_true", help="exit 5 when this machine is not the config's target (another board, not a Jetson, or "
                   "another TensorRT)")
    device.set_defaults(func=lambda args: _usage(device))

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


def entry():
    """The ``deploy`` command (console script, ``python -m pipeline``): ``main``, then exit. Once
    TensorFlow is loaded, exit without its teardown (0.6-0.8 s): every file is written and closed
    by then, and stdout and stderr are flushed first."""
    code = main()
    if "tensorflow" in sys.modules:
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing left to say
                pass
        os._exit(code)
    return code


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
