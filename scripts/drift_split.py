#!/usr/bin/env python3
"""Where does a board's drift live: between runs of one night, or between nights? (docs/nightly.md, "Where the
drift lives"; issue 28 item 1.)

    python scripts/drift_split.py FOLDER... [--figure p50_ms] [--batch 1] [--day-starts 12] [--format text|json]

FOLDER: run folders, or folders of run folders (a nightly history, or a campaign's), as ``deploy compare
--history`` reads them. Each run is put in the night it finished in (UTC; a night runs from ``--day-starts`` o'clock
to the same hour the next day, so 23:50 and 00:10 are one night). To measure, benchmark R >= 2 times a night for
five nights or more, each run in a fresh agent (``deploy run CONFIG --only benchmark --force benchmark``, then copy
the run folder, as the nightly's "Keep tonight" step does).

A one-way random-effects analysis of ln(figure): the runs' spread within a night (pooled over the nights with two
runs or more) and the spread of the nights' own levels beyond what the runs' spread explains (the ANOVA estimate,
unbalanced nights allowed). If the drift lives between runs, a same-night re-run in a fresh agent resamples it, and
a suspect night is worth re-running before the next night; if it lives between nights, a re-run of the same night
says nothing new and only the next night can confirm. Reads only run folders; nothing is run.
"""

import argparse
import datetime
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.errors import DeployError  # noqa: E402
from pipeline.report.collect import expand_history, results_by_batch  # noqa: E402
from pipeline.report.verdict import parse_stamp  # noqa: E402


def night_of(when, day_starts):
    """The night (a date) a run finished in: ``when`` (ISO 8601; UTC without an offset) minus ``day_starts`` hours,
    in UTC; None when ``when`` is not a time stamp."""
    stamp = parse_stamp(when)
    if stamp is None:
        return None
    return (stamp.astimezone(datetime.timezone.utc) - datetime.timedelta(hours=day_starts)).date().isoformat()


def split(runs, figure="p50_ms", batch=1, day_starts=12):
    """{nights, runs, sigma_runs, sigma_nights, share_nights, f, df, where} from loaded runs (collect.load_run)."""
    nights = {}
    for run in runs:
        value = (results_by_batch(run).get(batch) or {}).get(figure)
        night = night_of(run.get("when"), day_starts)
        if night is None or not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            continue
        nights.setdefault(night, []).append(math.log(value))
    groups = [v for _, v in sorted(nights.items()) if len(v) >= 2]
    if len(groups) < 2:
        raise DeployError("{} night{} with two runs or more of {} at batch {} (of {} runs read): benchmark at least "
                          "twice a night for two nights or more (five or more to trust the answer)".format(
                              len(groups), "" if len(groups) == 1 else "s", figure, batch, len(runs)))
    k, total = len(groups), sum(len(g) for g in groups)
    means = [sum(g) / len(g) for g in groups]
    grand = sum(sum(g) for g in groups) / total
    ss_within = sum(sum((x - m) ** 2 for x in g) for g, m in zip(groups, means))
    df_within, df_between = total - k, k - 1
    ms_within = ss_within / df_within
    ms_between = sum(len(g) * (m - grand) ** 2 for g, m in zip(groups, means)) / df_between
    n0 = (total - sum(len(g) ** 2 for g in groups) / total) / df_between  # runs per night, unbalanced
    var_nights = max(0.0, (ms_between - ms_within) / n0)
    share = var_nights / (var_nights + ms_within) if var_nights + ms_within > 0 else 0.0
    where = "between nights" if share > 0.5 else "between runs"
    return {"figure": figure, "batch": batch, "nights": k, "runs": total, "sigma_runs": math.sqrt(ms_within),
            "sigma_nights": math.sqrt(var_nights), "share_nights": share,
            "f": ms_between / ms_within if ms_within > 0 else math.inf, "df": [df_between, df_within], "where": where}


def describe(result):
    lines = ["{figure} at batch {batch}: {runs} runs over {nights} nights".format(**result),
             "  spread between runs of one night: sigma {:.2%} of ln".format(result["sigma_runs"]),
             "  spread of the nights' levels beyond it: sigma {:.2%} of ln".format(result["sigma_nights"]),
             "  F = {:.3g} on ({}, {}) degrees of freedom; the nights' share of the variance {:.0%}".format(
                 result["f"], result["df"][0], result["df"][1], result["share_nights"]),
             "the drift lives mostly {}: {}".format(result["where"], (
                 "a re-run of a suspect night says little; the next night confirms or clears it"
                 if result["where"] == "between nights" else
                 "a same-night re-run in a fresh agent resamples it: re-run a suspect night before waiting a night"))]
    if result["nights"] < 5:
        lines.append("  (fewer than five nights: a rough answer; measure more nights before changing the gate)")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--figure", default="p50_ms", choices=("p50_ms", "p99_ms", "mean_ms", "throughput_ips"))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--day-starts", type=int, default=12, choices=range(24), metavar="HOUR",
                   help="the UTC hour a night starts at (default 12)")
    p.add_argument("--format", default="text", choices=("text", "json"))
    args = p.parse_args(argv)
    try:
        result = split(expand_history(args.folders), args.figure, args.batch, args.day_starts)
    except DeployError as e:
        print("drift_split: error: " + str(e).splitlines()[0], file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, sort_keys=True) if args.format == "json" else describe(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
