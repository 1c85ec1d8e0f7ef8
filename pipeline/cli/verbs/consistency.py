"""deploy consistency MODEL: the same image alone and inside batches."""

import json

from pipeline.cli.args import add_atol, add_format, add_trust, add_verb, batch_sizes, count, positive
from pipeline.errors import EXIT_DIFFERENT


def add_parser(subparsers):
    p = add_verb(subparsers, "consistency", run)
    p.add_argument("model", help="a frozen TensorFlow graph (.pb/.pbtxt) or an .onnx model")
    p.add_argument("--batch-sizes", type=batch_sizes, default=[2, 8],
                   help="batch sizes to place each image in (default 2,8); above 16, 8 positions are sampled")
    p.add_argument("--time-limit", type=positive, default=600, metavar="SECONDS",
                   help="refuse a check estimated to take longer (default 600; estimated from a timed first batch)")
    p.add_argument("--samples", type=count, default=4, help="images to test (default 4)")
    p.add_argument("--dataset", help="image folder to take them from (default: seeded random pixels)")
    add_atol(p, 1e-5, "outputs alone and in a batch agree when", rtol=1e-4)
    add_format(p, ("text", "json"))
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_trust(p)


def run(args):
    """Same image alone and inside batches: do the outputs agree? Names the first layer that diverges.
    Exit 4 when they differ (deploy's "a comparison found a difference")."""
    from pipeline.numeric.consistency import check_model, format_report
    from pipeline.progress import Progress

    report = check_model(args.model, args.batch_sizes, args.samples, args.dataset, args.atol, rtol=args.rtol,
                         time_limit_s=args.time_limit, progress=Progress("quiet" if args.quiet else "human"))
    print(json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str) if args.format == "json"
          else format_report(report))
    return 0 if report.passed else EXIT_DIFFERENT
