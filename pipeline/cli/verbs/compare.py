"""deploy compare BASELINE CURRENT: a run judged against a baseline and the nights' history."""

import json

from pipeline.cli.args import add_format, add_verb, count, fraction, positive, write_or_fail
from pipeline.errors import DeployError

FINGERPRINT_KEYS = ("kind", "board", "gpu", "jetpack", "tensorrt", "runtime", "power_mode", "clocks")


def add_parser(subparsers):
    p = add_verb(subparsers, "compare", run)
    p.add_argument("baseline", help="the baseline run folder (chosen by you; a failed run is never a reference)")
    p.add_argument("current", help="the run folder to judge")
    p.add_argument("--history", nargs="+", metavar="DIR", help="earlier nights (run folders, or folders of them): the "
                   "reference is the median of the baseline and the last nights on its fingerprint, the band their spread")
    p.add_argument("--nights", type=count, default=20, help="how many nights make the reference, the baseline included "
                   "(default 20)")
    p.add_argument("--expect-change", action="append", default=[], metavar="KEY", choices=FINGERPRINT_KEYS,
                   help="a fingerprint key whose change is intended (repeatable): compared anyway instead of "
                   "'not comparable'")
    p.add_argument("--tolerance", type=fraction, default=0.03, help="relative change in latency and throughput "
                   "that is never a regression (default 0.03)")
    p.add_argument("--accuracy-tolerance", type=fraction, default=0.02, help="absolute drop allowed in engine top-1 "
                   "agreement, at least one image (default 0.02)")
    p.add_argument("--k", type=positive, default=2.0, help="noise band width in standard deviations of the "
                   "nights (default 2)")
    add_format(p)
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML file, one test case per figure")
    p.add_argument("--output", "-o", metavar="FILE", help="also write the comparison as JSON (schema "
                   "deploy.comparison/2), e.g. RUN/comparison.json for deploy report")


def run(args):
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
    print({"text": format_text, "markdown": format_markdown, "json": lambda r: as_json}[args.format](result))
    if args.junit:
        write_or_fail(args.junit, format_junit(result), "--junit")
    if args.output:
        write_comparison(args.output, result)  # checked against deploy.comparison/2, what deploy report reads
    return 0 if result["verdict"] == "pass" else EXIT_DIFFERENT
