"""deploy diff A B: what changed between two graphs."""

import json

from pipeline.cli.args import add_format, add_verb


def add_parser(subparsers):
    p = add_verb(subparsers, "diff", run)
    p.add_argument("a", help="a frozen .pb/.pbtxt, SavedModel directory, .keras/.h5, TF1 .meta or .onnx")
    p.add_argument("b", help="the model to compare it with (same kind); exit 0: same structure, 4: different")
    add_format(p, ("text", "json"))
    p.add_argument("--signature", default="serving_default", help="SavedModel signature (default serving_default)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def run(args):
    """What changed between two graphs, matching nodes by structure (not by creation-order names)."""
    from pipeline.errors import EXIT_DIFFERENT
    from pipeline.graph.diff import diff_models, format_text
    from pipeline.progress import Progress

    report = diff_models(args.a, args.b, args.signature, outlive=True, progress=Progress("quiet" if args.quiet else "human"))
    print(json.dumps(report.to_dict(), indent=2, sort_keys=True) if args.format == "json" else format_text(report))
    return 0 if report.structurally_identical else EXIT_DIFFERENT
