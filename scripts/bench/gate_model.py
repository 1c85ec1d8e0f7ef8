"""A fast in-memory model of scripts/bench/gate_noise.py, for many more nights than the CLI harness can run.

The same drift models, per-call noise and step schedule as gate_noise.py, drawn from the same generator in the
same order (seed 0 with 20 sequences gives gate_noise.py's own counts), the same per-night figures (p50, p99 and
the measured throughput at batch sizes 1 and 8, with their 95 % intervals from pipeline.report.gate_stats), judged
by the gate's own ``level_judgement`` and ``persistence_judgement``; the reference and the previous nights are
picked in memory as pipeline.report.compare.reference_nights and gate_nights.previous_nights pick them from run
folders (a regression night out of the reference, a suspect night out until the night after it passed, the last
19 reference nights and the baseline). No files, no CLI: use gate_noise.py for the figures of record, this to
see where the rule stands on 10x the nights (its intervals are narrower) or to try a change of the rule.

    python scripts/bench/gate_model.py --drift all --sequences 60 --seed 1
    python scripts/bench/gate_model.py --drift t3 --sequences 100 --seed 2 --why   # which rule made each false alarm

``--sigma-known S`` is the oracle: the gate is told the nights' sigma of ln figure (S, the drift's own: 0.02 for
normal) instead of learning it from its reference nights (its MIN_NIGHTS set out of reach, its SIGMA_PRIOR to S), so
the figures are the ceiling of the rule's own tests, k for k. ``--by-night N`` counts a +5 % step caught by its Nth
night instead of its 3rd, and says how many by each night (the first three nights of a step are the default
run's draws, so its count by night 3 is the default run's).

``--why`` adds, per drift model, where the false alarms came from: the rule that made each red night (the
first-night size rule, the two-night rule, the window: from the row's note), the reference's length that night,
and how many sequences had any (a red night stays out of the reference, so one early false alarm can keep a
sequence red: the alarms cluster).
"""

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.gate_noise import DRIFTS, GOALS, KEEP, level, share, wilson  # noqa: E402
from pipeline.report import gate_stats  # noqa: E402

MEDIANS = {1: 4.0, 8: 20.0}
FIGURES = (("p50_ms", 0.5), ("p99_ms", 0.99), ("throughput_ips", None))


class Args:
    calls, spread, outliers, outlier_range = 1000, 0.03, 0.01, (1.5, 3.0)


def calls(rng, median_ms):
    """gate_noise.calls, the same draws."""
    t = median_ms / 1000.0 * np.exp(rng.normal(0.0, Args.spread, Args.calls))
    slow = rng.random(Args.calls) < Args.outliers
    t[slow] *= rng.uniform(Args.outlier_range[0], Args.outlier_range[1], int(slow.sum()))
    return t


def figures(samples, factor):
    """{(figure, batch size): (value, 95 % interval)} of one night, as pipeline.bench.latency.summarize writes them."""
    out = {}
    for bs, t in samples.items():
        ms = t * factor * 1000.0
        pct = np.percentile(ms, np.arange(101))
        row = {"mean_ms": float(ms.mean()), "std_ms": float(ms.std()), "iterations": len(ms),
               "percentiles_ms": [float("{:.6g}".format(v)) for v in pct], "p50_ms": float(np.percentile(ms, 50)),
               "p99_ms": float(np.percentile(ms, 99)), "throughput_ips": bs * len(ms) / float(ms.sum() / 1000.0)}
        for key, q in FIGURES:
            interval = (gate_stats.quantile_interval(row, q) if q else
                        gate_stats.mean_interval(row, row["throughput_ips"]))
            out[(key, bs)] = (row[key], interval)
    return out


class Night:
    def __init__(self, figs):
        self.figs, self.verdict, self.status, self.rules, self.improved = figs, None, {}, set(), False


RULES = (("first", "on its first night"), ("two nights", "the night before too"), ("window", "nights is"))


def rules_of(note):
    """The persistence rules a regression row's note names (persistence_judgement's words)."""
    return {name for name, words in RULES if words in note} or {"?"}


def reference(baseline, kept):
    picked = [n for n in kept[-KEEP:] if n.verdict != "regression"]
    picked = [n for i, n in enumerate(picked) if n.verdict != "suspect" and not (n.improved and i + 1 == len(picked))
              or (i + 1 < len(picked) and picked[i + 1].verdict == "pass")]
    return [baseline] + picked[-19:]


def judge(baseline, night, kept, tolerance=0.03, k=2.0):
    """True when the night is red (a regression): deploy compare's verdict for these figures."""
    ref, recent = reference(baseline, kept), kept[-KEEP:]
    before = reference(baseline, kept[-KEEP:][:-(gate_stats.WINDOW - 1)])  # the window's reference: before its nights
    previous = recent[-1].status if recent else {}
    for (key, bs), (cur, interval) in night.figs.items():
        lower = key != "throughput_ips"
        values = [r.figs[(key, bs)][0] for r in ref]
        ref_intervals = [r.figs[(key, bs)][1] for r in ref] if lower else ()
        judged = gate_stats.level_judgement(cur, values, interval, tolerance, k, lower, True, ref_intervals)
        judged = gate_stats.persistence_judgement(judged, cur, [n.figs[(key, bs)][0] for n in recent],
                                                  previous.get((key, bs)), lower,
                                                  [r.figs[(key, bs)][0] for r in before])
        night.status[(key, bs)] = judged["status"]
        if judged["status"] == "regression":
            night.rules |= rules_of(judged["note"])
    statuses = set(night.status.values())
    night.improved = "improved" in statuses
    night.verdict = "regression" if "regression" in statuses else "suspect" if "suspect" in statuses else "pass"
    return night.verdict == "regression"


def simulate(drift, sequences, length, every, seed, steps, why=None, by_night=None):
    """(quiet, caught): [red, nights] of the unchanged nights, {step: [caught, steps]}. ``why``: a Counter that
    gets each false alarm's rules and reference length (``("rule", ...)``, ``("n", ...)``), the sequences
    with any (``("sequences", )``) and each caught step's night (``("night", step, j)``, j from 1).
    ``by_night``: {step: the night it must be caught by}, where not GOALS'. The nights a later goal needs are
    drawn from a generator of their own, after gate_noise.py's draws: the first three nights of every step are
    the same whatever the goal, so the counts by night 3 are the default run's."""
    rng, later = np.random.default_rng([seed, DRIFTS.index(drift)]), np.random.default_rng([seed, DRIFTS.index(drift), 1])
    quiet, caught = [0, 0], {s: [0, 0] for s in steps}
    goal = {s: (by_night or {}).get(s, GOALS[s][0]) for s in steps}
    drawn = max(GOALS[s][0] for s in steps)
    for _ in range(sequences):
        red_before = quiet[0]
        nights = length + 1 + drawn
        levels = [level(rng, drift) for _ in range(nights)]
        samples = [{bs: calls(rng, m) for bs, m in MEDIANS.items()} for _ in range(nights)]
        extra = max(goal.values()) - drawn
        if extra > 0:
            levels += [level(later, drift) for _ in range(extra)]
            samples += [{bs: calls(later, m) for bs, m in MEDIANS.items()} for _ in range(extra)]
        baseline, kept = Night(figures(samples[0], levels[0])), []
        for t in range(1, length + 1):
            night = Night(figures(samples[t], levels[t]))
            red = judge(baseline, night, kept)
            quiet[0] += red
            quiet[1] += 1
            if red and why is not None:
                why[("rule", " + ".join(sorted(night.rules)))] += 1
                n = len(reference(baseline, kept))
                why[("n", "1-4" if n < 5 else "5-19" if n < 20 else "20")] += 1
            if t % every == 0:
                for s in steps:
                    branch, hit = list(kept), 0
                    for j in range(goal[s]):
                        stepped = Night(figures(samples[t + j], levels[t + j] * (1 + s)))
                        if judge(baseline, stepped, branch):
                            hit = j + 1
                            break
                        branch.append(stepped)
                    caught[s][0] += bool(hit)
                    caught[s][1] += 1
                    if hit and why is not None:
                        why[("night", s, hit)] += 1
            kept.append(night)
        if why is not None and quiet[0] > red_before:
            why[("sequences",)] += 1
    return quiet, caught


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--drift", choices=DRIFTS + ("all",), default="all")
    p.add_argument("--sequences", type=int, default=60)
    p.add_argument("--length", type=int, default=30)
    p.add_argument("--step-every", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--why", action="store_true", help="say which rule made the false alarms, on which references")
    p.add_argument("--sigma-known", type=float, metavar="S",
                   help="the oracle: tell the gate the nights' sigma of ln figure instead of learning it (0.02: normal)")
    p.add_argument("--by-night", type=int, default=GOALS[0.05][0], metavar="N",
                   help="count +5 %% caught by its Nth night (default %(default)s, the goal's)")
    p.add_argument("--window-k", type=float, default=gate_stats.WINDOW_K, metavar="K",
                   help="the window's k (default %(default)s, the gate's WINDOW_K)")
    args = p.parse_args(argv)
    if args.window_k <= 0 or args.by_night < 1 or (args.sigma_known is not None and not 0 < args.sigma_known < 1):
        p.error("--window-k must be above 0, --by-night 1 or more and --sigma-known a sigma of ln figure between 0 and 1")
    shipped = gate_stats.MIN_NIGHTS, gate_stats.SIGMA_PRIOR, gate_stats.WINDOW_K
    gate_stats.WINDOW_K = args.window_k
    if args.sigma_known is not None:
        gate_stats.MIN_NIGHTS, gate_stats.SIGMA_PRIOR = 10 ** 9, args.sigma_known
    try:
        met = _run(args)
    finally:
        gate_stats.MIN_NIGHTS, gate_stats.SIGMA_PRIOR, gate_stats.WINDOW_K = shipped
    as_shipped = args.sigma_known is None and args.window_k == shipped[2] and args.by_night <= GOALS[0.05][0]
    return 0 if met and as_shipped else 1  # a goal is met by the gate as it ships, on the goal's nights


def _run(args):
    steps, by_night = sorted(GOALS), {0.05: args.by_night}
    print("| drift | false alarms | " + " | ".join("+{:.0%} by night {}".format(s, by_night.get(s, GOALS[s][0]))
                                                for s in steps) + " |")
    print("|---|---|" + "---|" * len(steps))
    met, notes = True, []
    for drift in DRIFTS if args.drift == "all" else (args.drift,):
        why = collections.Counter()
        quiet, caught = simulate(drift, args.sequences, args.length, args.step_every, args.seed, steps, why, by_night)
        print("| {} | {} | {} |".format(drift, share(*quiet), " | ".join(share(*caught[s]) for s in steps)), flush=True)
        if args.by_night != GOALS[0.05][0]:
            notes.append("{}: +5 % caught by night {}".format(drift, ", ".join("{} {}".format(j, share(sum(
                why[("night", 0.05, i)] for i in range(1, j + 1)), caught[0.05][1])) for j in range(1, args.by_night + 1))))
        if args.why:
            notes.append("{}: {} false alarms in {} of {} sequences; by rule: {}; by reference nights: {}".format(
                drift, quiet[0], why[("sequences",)], args.sequences,
                ", ".join("{} {}".format(k[1], v) for k, v in sorted(why.items()) if k[0] == "rule") or "none",
                ", ".join("{} {}".format(n, why[("n", n)]) for n in ("1-4", "5-19", "20") if why[("n", n)]) or "none"))
        p_quiet, _, high = wilson(*quiet)
        met &= p_quiet <= 0.01 and high <= 0.02 and all(caught[s][0] >= GOALS[s][1] * caught[s][1] for s in steps)
    for line in notes:
        print("- " + line)
    return met


if __name__ == "__main__":
    sys.exit(main())
