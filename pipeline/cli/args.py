"""What the verbs share: argparse ``type=`` parsers, the flags several verbs take, and small helpers.

Imports only the standard library (and ``pipeline.errors``): every ``deploy <verb> --help`` builds
the whole parser, so nothing here may import anything heavy.
"""

import argparse
import sys

from pipeline.errors import EXIT_BAD_INPUT, DeployError

FORMATS = ("text", "json", "markdown")


def fraction(text):
    """argparse type: a number from 0 to 1."""
    value = _number(text, float)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("{} must be between 0 and 1 (0.05 is 5 %)".format(value))
    return value


def positive(text):
    """argparse type: a number above 0."""
    value = _number(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError("{} must be above 0".format(value))
    return value


def count(text):
    """argparse type: a whole number of 1 or more."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError("{} must be 1 or more".format(value))
    return value


def _number(text, kind):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a {}".format(text, "whole number" if kind is int else "number"))


def batch_sizes(text):
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


def tolerance(text):
    """argparse type: a finite number of 0 or more (a nan tolerance would pass any comparison)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a number".format(text))
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError("{} must be a finite number of 0 or more".format(text))
    return value


def dims(text):
    """argparse type: comma-separated dimensions, ``?``, ``-1`` or ``None`` for an unknown one."""
    try:
        return [None if d in ("?", "-1", "None") else int(d) for d in text.split(",") if d]
    except ValueError:
        raise argparse.ArgumentTypeError("{!r}: expected comma-separated dimensions, e.g. 1,224,224,3".format(text))


def named_dims(text):
    """argparse type: ``[NAME=]DIMS`` -> (NAME or None, dims), e.g. ``input=1,224,224,3``."""
    name, _, shape = text.rpartition("=")
    return name or None, dims(shape)


def node_dims(text):
    """argparse type: ``NODE[=DIMS]`` -> (NODE, dims or None), e.g. ``conv1/Relu=1,112,112,64``."""
    node, _, shape = text.partition("=")
    return node, dims(shape) if shape else None


def names(text):
    """argparse type: comma-separated names -> list."""
    return [n for n in text.split(",") if n]


class LazyChoices:
    """``choices=`` read from a module only when argparse looks at them (a parse that uses the flag, its
    help, its error), so that ``deploy --help`` does not import the module that holds the list."""

    def __init__(self, module, name):
        self._where = module, name

    def _values(self):
        import importlib

        module, name = self._where
        return tuple(getattr(importlib.import_module(module), name))

    def __contains__(self, value):
        return value in self._values()

    def __iter__(self):
        return iter(self._values())

    def __len__(self):
        return len(self._values())


def add_verb(subparsers, name, func):
    """A sub-parser running ``func(args)``: its help (``deploy --help``'s line) is the first sentence of ``func``'s
    docstring, its description (``deploy NAME --help``) the docstring's first paragraph, both whole."""
    paragraph = " ".join(line.strip() for line in func.__doc__.strip().split("\n\n")[0].splitlines())
    parser = subparsers.add_parser(name, help=first_sentence(paragraph), description=paragraph)
    parser.set_defaults(func=func)
    return parser


def first_sentence(text):
    """``text`` up to its first full stop, question or exclamation mark followed by a space (all of it without)."""
    for i, ch in enumerate(text):
        if ch in ".?!" and text[i + 1:i + 2] == " ":
            return text[:i + 1]
    return text


def add_group(subparsers, name, help, description, dest, metavar):
    """A verb with actions (``deploy ckpt inspect``): returns (its parser, its actions' sub-parsers);
    with no action it prints its usage and exits 1."""
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.set_defaults(func=lambda args: usage(parser))
    return parser, parser.add_subparsers(dest=dest, metavar=metavar)


def add_config(parser, help="the YAML config, e.g. configs/jetson_tx2.yaml"):
    """The config, always the first positional argument, and its ``--set`` overrides."""
    parser.add_argument("config", help=help)
    parser.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override a config key, e.g. --set stages.train.epochs=1 (repeatable)")


def add_trust(parser):
    parser.add_argument("--trust-model", action="store_true",
                        help="run graphs even when they hold ops that act outside the graph (file, Python, checkpoint, "
                             "queue ops): only for files you trust")


def add_custom_objects(parser):
    parser.add_argument("--custom-objects", metavar="FILE.py",
                        help="a Python file defining the custom Keras layer classes a .keras/.h5 uses (its "
                             "CUSTOM_OBJECTS dict, else every class it defines); deploy runs it: only for code you trust")


def use_custom_objects(args):
    """--custom-objects FILE.py: in the environment, so the readers and deploy's child processes load the user's code."""
    if getattr(args, "custom_objects", None):
        import os

        from pipeline.tf.keras_model import CUSTOM_OBJECTS_ENV

        os.environ[CUSTOM_OBJECTS_ENV] = os.path.abspath(args.custom_objects)


def add_format(parser, choices=FORMATS, default="text", help=None, json_alias=False):
    """``--format``; with ``json_alias``, the older ``--json`` too (deprecated: the same as --format json)."""
    parser.add_argument("--format", default=default, choices=choices,
                        help=help or "output format: {} (default {})".format(", ".join(choices), default))
    if json_alias:
        parser.add_argument("--json", dest="format", action="store_const", const="json",
                            help="deprecated: the same as --format json")


class _Deprecated(argparse.Action):
    """An older spelling of a flag: stores into the new flag's ``dest`` and says so on stderr."""

    def __init__(self, option_strings, dest, use=None, **kwargs):
        self.use = use
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print("deploy: warning: {} is deprecated: use {} (the same meaning)".format(option_string, self.use),
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_atol(parser, default, what, rtol=None):
    """``--atol``: the absolute part of numeric's one element rule, |a - b| <= atol + rtol * |b|
    (pipeline.numeric.diff), the one meaning this word has in every verb. ``rtol``: its default when the
    verb also takes ``--rtol`` (None: rtol is 0, said in the help). The older ``--tolerance`` is kept as
    a deprecated alias (it meant this in rewrite and consistency; deploy compare's relative latency
    change is ``--latency-tolerance``)."""
    parser.add_argument("--atol", type=tolerance, default=default, metavar="ABS",
                        help="{}: absolute tolerance, |a - b| <= atol{} (default {:g})".format(
                            what, " + rtol * |b|" if rtol is not None else ", rtol 0", default))
    if rtol is not None:
        parser.add_argument("--rtol", type=tolerance, default=rtol, metavar="REL",
                            help="relative tolerance of the same rule (default {:g})".format(rtol))
    deprecated_alias(parser, "--tolerance", "atol", "--atol", type=tolerance, metavar="ABS")


def deprecated_alias(parser, flag, dest, use, **kwargs):
    """``flag``: an older spelling of ``use`` (same ``dest``), still accepted, with a warning on stderr.
    E.g. deploy compare's relative latency change: ``--latency-tolerance``, ``--tolerance`` deprecated."""
    parser.add_argument(flag, dest=dest, action=_Deprecated, use=use, help="deprecated: the same as " + use, **kwargs)


def json_error(error):
    """The one shape of an error under ``--format json``, on stdout: ``{"error": {"message", "exit_code"}}``,
    with "problems" when there are several (deploy validate). deploy run's event stream adds
    ``"event": "error"`` to the same object."""
    body = {"message": error.message, "exit_code": error.code}
    problems = list(getattr(error, "problems", ()) or ())
    if len(problems) > 1:
        body["problems"] = problems
    return {"error": body}


def refuse(flags, why):
    """Refuse flags that would do nothing: ``flags`` is [(flag, value)], every one given is named."""
    given = [flag for flag, value in flags if value not in (None, False, [], ())]
    if given:
        raise DeployError("{}: {}".format(", ".join(given), why))


def usage(parser):
    parser.print_help(sys.stderr)
    return EXIT_BAD_INPUT


def write_or_fail(path, text, flag):
    from pipeline.files import write_text

    try:
        write_text(path, text)
    except OSError as e:
        raise DeployError("{} {}: cannot write ({})".format(flag, path, e.strerror or e))
