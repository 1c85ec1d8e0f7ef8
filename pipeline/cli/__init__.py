"""deploy: take a TensorFlow model from training to a TensorRT engine on an NVIDIA Jetson.

The command line is a thin layer: each verb parses its flags and calls one library function.
Nothing heavy is imported here, so ``deploy --help`` and ``deploy validate`` start fast. Here: the
parser, built from the list of verb modules (``VERBS``, one module per verb in ``pipeline.cli.verbs``:
its flags in ``add_parser``, its body in ``run``), and ``main`` (exit codes, SIGTERM, a closed stdout).
"""

import argparse
import json
import sys

from pipeline.cli.args import json_error, usage
from pipeline.cli.verbs import (
    check, ckpt, compare, consistency, data, device, diff, estimate, report, rewrite, run, schema, targets, unfreeze,
    validate,
)
from pipeline.errors import EXIT_BAD_INPUT, DeployError

# In the order `deploy --help` lists them. A new verb: a module in pipeline/cli/verbs/ and an entry here.
VERBS = (run, check, estimate, rewrite, consistency, diff, unfreeze, report, compare, validate, schema, targets, ckpt, device,
         data)


def build_parser():
    from pipeline import __version__

    parser = _Parser(
        prog="deploy",
        description=__doc__.strip().splitlines()[0],
        epilog="Exit codes: 0 success, 1 bad input or config, 2 model not deployable to the target, 3 a stage failed, "
               "4 a comparison found a difference, 5 the device could not be reached or used.",
    )
    parser.add_argument("--version", action="version", version="deploy " + __version__)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for verb in VERBS:
        verb.add_parser(subparsers)
    return parser


def verb_names(parser=None):
    """Every verb and action the parser knows, as argument lists: [["run"], ..., ["ckpt", "inspect"], ...]."""
    found = []

    def walk(p, prefix):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found.append(prefix + [name])
                    walk(child, prefix + [name])

    walk(parser or build_parser(), [])
    return found


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


def entry():
    """The ``deploy`` command (console script, ``python -m pipeline``): ``main``, then exit. Once
    TensorFlow is loaded, or a big graph was kept for the end (``pipeline.files.outlive``), exit
    without the teardown (TensorFlow's: 0.6-0.8 s; a 200,000-node graph's: 0.2-0.4 s): every file
    is written and closed by then, and stdout and stderr are flushed first."""
    from pipeline.files import outlived, run_at_exit

    code = main()
    if "tensorflow" in sys.modules or outlived():
        import os

        run_at_exit()  # deploy's own exit work (temporary folders, device connections): os._exit skips atexit

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
        return usage(parser)
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
        if getattr(args, "format", None) == "json":  # every verb: one shape (cli/args.json_error), on stdout
            shape = json_error(e)
            if getattr(args, "json_events", False):
                shape = dict(event="error", **shape)
            print(json.dumps(shape, sort_keys=True), flush=True)
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
