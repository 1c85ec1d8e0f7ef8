"""deploy compare BASELINE CURRENT: a run judged against a baseline and the nights' history."""

import argparse
import json
import math

from pipeline.cli.args import add_format, add_verb, write_or_fail

FINGERPRINT_KEYS = ("kind", "board", "gpu", "jetpack", "tensorrt", "runtime", "power_mode", "clocks", "converters")
K_MAX = 10.0  # a band of more than 10 sigma would call nothing a regression
NIGHTS_MAX = 365


def _bounded(kind, low, high, what, low_open=False):
    """argparse type: a finite number of ``kind`` within [low, high] (``low_open``: above low), else a
    one-line error at parsing (1e300, nan, inf, 10^400 included)."""
    def parse(text):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError("{!r} is not a {}".format(text, "whole number" if kind is int else "number"))
        ok = (kind is int or math.isfinite(value)) and (value > low if low_open else value >= low) and value <= high
        if not ok:
            raise argparse.ArgumentTypeError("{} must be {}".format(text, what))
        return value
    return parse


def add_parser(subparsers):
    p = add_verb(subparsers, "compare", run)
    p.add_argument("baseline", help="the baseline run folder (chosen by you; a failed run is never a reference)")
    p.add_argument("current", help="the run folder to judge")
    p.add_argument("--history", nargs="+", metavar="DIR", help="earlier nights (run folders, or folders of them): the "
                   "reference is the median of the baseline and the last nights on its fingerprint, the band their spread; "
                   "their comparison.json files confirm a figure out of band two nights running")
    p.add_argument("--nights", type=_bounded(int, 1, NIGHTS_MAX, "a whole number from 1 to {}".format(NIGHTS_MAX)),
                   default=20, help="how many nights make the reference, the baseline included (default 20)")
    p.add_argument("--expect-change", action="append", default=[], metavar="KEY", choices=FINGERPRINT_KEYS,
                   help="a fingerprint key whose change is intended (repeatable): compared anyway instead of "
                   "'not comparable'")
    p.add_argument("--latency-tolerance", "--tolerance", dest="tolerance", metavar="REL", default=0.03,
                   type=_bounded(float, 0, 1, "a fraction from 0 to 1 (0.03 is 3 %)"),
                   help="relative change in latency and throughput that is never a regression (default 0.03; "
                   "--tolerance is the same flag)")
    p.add_argument("--accuracy-tolerance", type=_bounded(float, 0, 1, "a fraction from 0 to 1 (0.02 is 2 points)"),
                   default=0.02, help="absolute drop allowed in engine top-1 agreement, at least one image (default 0.02)")
    p.add_argument("--k", type=_bounded(float, 0, K_MAX, "a number above 0 and at most {:g}".format(K_MAX), low_open=True),
                   default=2.0, help="noise band width in standard deviations of the nights (default 2)")
    add_format(p)
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML file, one test case per figure")
    p.add_argument("--output", "-o", metavar="FILE", help="also write the comparison as JSON (schema "
                   "deploy.comparison/2), e.g. RUN/comparison.json for deploy report")


def run(args):
    """Judge a run against a baseline and the nights' history: latency, throughput, accuracy; noise-aware, and red
    only for a change that persists. Exit 0: pass, suspect or throttled (warnings); exit 4: a regression, a
    comparison that is not comparable, or one that compared nothing."""
    from pipeline.errors import EXIT_DIFFERENT
    from pipeline.report.collect import expand_history, load_run
    from pipeline.report.compare import (PASSING, compare_runs, format_junit, format_markdown, format_text,
                                         write_comparison)

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
    return 0 if result["verdict"] in PASSING else EXIT_DIFFERENT
