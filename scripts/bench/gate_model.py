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


def simulate(drift, sequences, length, every, seed, steps, why=None):
    """(quiet, caught): [red, nights] of the unchanged nights, {step: [caught, steps]}. ``why``: a Counter that
    gets each false alarm's rules and reference length (``("rule", ...)``, ``("n", ...)``) and the sequences
    with any (``("sequences", )``)."""
    rng = np.random.default_rng([seed, DRIFTS.index(drift)])
    quiet, caught = [0, 0], {s: [0, 0] for s in steps}
    for _ in range(sequences):
        red_before = quiet[0]
        nights = length + 1 + max(GOALS[s][0] for s in steps)
        levels = [level(rng, drift) for _ in range(nights)]
        samples = [{bs: calls(rng, m) for bs, m in MEDIANS.items()} for _ in range(nights)]
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
                    branch, hit = list(kept), False
                    for j in range(GOALS[s][0]):
                        stepped = Night(figures(samples[t + j], levels[t + j] * (1 + s)))
                        if judge(baseline, stepped, branch):
                            hit = True
                            break
                        branch.append(stepped)
                    caught[s][0] += hit
                    caught[s][1] += 1
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
    args = p.parse_args(argv)
    steps = sorted(GOALS)
    print("| drift | false alarms | " + " | ".join("+{:.0%} by night {}".format(s, GOALS[s][0]) for s in steps) + " |")
    print("|---|---|" + "---|" * len(steps))
    met, notes = True, []
    for drift in DRIFTS if args.drift == "all" else (args.drift,):
        why = collections.Counter() if args.why else None
        quiet, caught = simulate(drift, args.sequences, args.length, args.step_every, args.seed, steps, why)
        print("| {} | {} | {} |".format(drift, share(*quiet), " | ".join(share(*caught[s]) for s in steps)), flush=True)
        if why is not None:
            notes.append("{}: {} false alarms in {} of {} sequences; by rule: {}; by reference nights: {}".format(
                drift, quiet[0], why[("sequences",)], args.sequences,
                ", ".join("{} {}".format(k[1], v) for k, v in sorted(why.items()) if k[0] == "rule") or "none",
                ", ".join("{} {}".format(n, why[("n", n)]) for n in ("1-4", "5-19", "20") if why[("n", n)]) or "none"))
        p_quiet, _, high = wilson(*quiet)
        met &= p_quiet <= 0.01 and high <= 0.02 and all(caught[s][0] >= GOALS[s][1] * caught[s][1] for s in steps)
    for line in notes:
        print("- " + line)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
