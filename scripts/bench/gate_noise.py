"""How often does the nightly gate go red for nothing, and how often does it catch a real slowdown?

Drives the real gate (``pipeline.report.compare.compare_runs``, the function ``deploy compare`` calls,
in-process) night after night as the nightly workflow does: a baseline night, then nights whose
history is every kept night since the baseline (the gate's own reader picks the reference: the
baseline and the last N nights on its fingerprint, nights it called a regression left out). Each
night's figures are made by the real ``pipeline.bench.latency.summarize`` from simulated calls:

- per call: log-normal spread (``--spread``, sigma of ln, default 3 %); ``--outliers`` of the calls
  (default 1 %) slowed ``--outlier-range`` times (default 1.5-3x);
- per night: the level drifts by ``--drift`` (default 2 %): uniform within ±drift
  (``--drift-shape uniform``, default) or normal with sigma = drift (``normal``);
- the baseline night is up to ``--reference-off`` (default 4 %) off the typical level (uniform).

Every night is judged as it is (no change: a red night is a false alarm), and again with all its calls
``--steps`` slower (default +5, +10, +25 %: p50, p99 and the median-call throughput all move by the
step): the share of those caught is the detection rate per figure. The history only ever holds
unchanged nights, so each stepped night is a regression's first night.

    python scripts/bench/gate_noise.py                 # 25 baselines x 24 nights = 600 nights, ~1 min
    python scripts/bench/gate_noise.py --drift-shape normal

Seeded: the same arguments print the same figures.
"""

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pipeline.bench.latency import summarize  # noqa: E402
from pipeline.report.collect import check_benchmark  # noqa: E402
from pipeline.report.compare import DEFAULTS, MIN_NIGHTS, compare_runs  # noqa: E402

FIGURES = ("p50_ms", "p99_ms", "throughput_ips")
FINGERPRINT = {"board": "jetson_tx2", "l4t": "32.7.6", "jetpack": "4.6.6", "tensorrt": "8.2.1", "cuda": "10.2",
               "power_mode": {"mode_name": "MAXN", "mode_id": 0, "is_max": True}, "clocks_locked": True}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sequences", type=int, default=40, help="baselines (default 40)")
    p.add_argument("--length", type=int, default=30, help="nights after each baseline (default 30)")
    p.add_argument("--calls", type=int, default=1000, help="timed calls per batch size and night (default 1000)")
    p.add_argument("--medians", default="1:4,8:20", help="batch size:median ms, ... (default 1:4,8:20)")
    p.add_argument("--spread", type=float, default=0.03)
    p.add_argument("--outliers", type=float, default=0.01)
    p.add_argument("--outlier-range", type=float, nargs=2, default=(1.5, 3.0))
    p.add_argument("--drift", type=float, default=0.02)
    p.add_argument("--drift-shape", choices=("uniform", "normal"), default="uniform")
    p.add_argument("--reference-off", type=float, default=0.04)
    p.add_argument("--steps", default="0.05,0.10,0.25")
    p.add_argument("--tolerance", type=float, default=DEFAULTS["tolerance"])
    p.add_argument("--k", type=float, default=DEFAULTS["k"])
    p.add_argument("--nights", type=int, default=DEFAULTS["nights"])
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def calls(rng, args, median_ms, level):
    """Per-call seconds of one batch size on one night."""
    t = median_ms / 1000.0 * level * np.exp(rng.normal(0.0, args.spread, args.calls))
    slow = rng.random(args.calls) < args.outliers
    t[slow] *= rng.uniform(args.outlier_range[0], args.outlier_range[1], int(slow.sum()))
    return t


def night_run(name, when, samples, scale=1.0):
    """A run as pipeline.report.collect.load_run returns it (the keys compare reads), its benchmark.json
    summarized by the real summarize and checked by the real reader's checks."""
    bench = {"where": {"runtime": "tensorrt", "version": "8.2.1", "target": "jetson_tx2", "on_target_device": True,
                       "fingerprint": dict(FINGERPRINT), "host": None},
             "results": [dict(summarize(list(t * scale), bs), batch_size=bs) for bs, t in samples.items()]}
    check_benchmark(bench, "{}/benchmark/benchmark.json".format(name))
    return {"dir": "/sim/" + name, "name": name, "when": when, "record": {"exit_code": 0}, "benchmark": bench,
            "check": None, "history": None, "comparison": None, "gate": None, "failed": None}


def flagged(result):
    """{figure: bool}: flagged a regression at any batch size; and the night's verdict."""
    return {f: any(r["figure"] == f and r["status"] == "regression" for r in result["rows"]) for f in FIGURES}


def simulate(args):
    rng = np.random.default_rng(args.seed)
    medians = {int(a): float(b) for a, b in (x.split(":") for x in args.medians.split(","))}
    steps = [float(s) for s in args.steps.split(",")]
    opts = dict(tolerance=args.tolerance, k=args.k, nights=args.nights)
    quiet = {"all": [0, 0], "early": [0, 0], "late": [0, 0]}  # [red nights, nights]
    quiet_fig = {f: 0 for f in FIGURES}
    caught = {s: {f: 0 for f in FIGURES + ("night",)} for s in steps}
    caught_late = {s: [0, 0] for s in steps}
    for seq in range(args.sequences):
        off = rng.uniform(-args.reference_off, args.reference_off)
        base = night_run("s{}-baseline".format(seq), "2026-01-01T00:00:00", {bs: calls(rng, args, m, 1 + off)
                                                                            for bs, m in medians.items()})
        history = [base]  # the workflow starts the history with the baseline night
        for t in range(1, args.length + 1):
            if args.drift_shape == "uniform":
                level = 1 + rng.uniform(-args.drift, args.drift)
            else:
                level = math.exp(rng.normal(0.0, args.drift))
            samples = {bs: calls(rng, args, m, level) for bs, m in medians.items()}
            when = "2026-01-01T00:00:{:02d}".format(t) if t < 60 else "2026-01-{:02d}T00:00:00".format(t)
            tonight = night_run("s{}-n{}".format(seq, t), when, samples)
            result = compare_runs(base, tonight, history, **opts)
            red = result["verdict"] != "pass"
            usable = sum(1 for h in history if (h.get("gate") or {}).get("verdict") != "regression")
            phase = "early" if min(usable, args.nights) < MIN_NIGHTS else "late"
            for key in ("all", phase):
                quiet[key][0] += red
                quiet[key][1] += 1
            for f, v in flagged(result).items():
                quiet_fig[f] += v
            for s in steps:
                stepped = compare_runs(base, night_run(tonight["name"], when, samples, 1 + s), history, **opts)
                for f, v in flagged(stepped).items():
                    caught[s][f] += v
                caught[s]["night"] += stepped["verdict"] == "regression"
                if phase == "late":
                    caught_late[s][0] += flagged(stepped)["p50_ms"]
                    caught_late[s][1] += 1
            tonight["gate"] = {"verdict": result["verdict"]}  # what -o <night>/comparison.json keeps
            history.append(tonight)
    return quiet, quiet_fig, caught, caught_late


def pct(a, b):
    return "{:.1f} %".format(100.0 * a / b) if b else "–"


def main(argv=None):
    args = parse(argv)
    started = time.time()
    quiet, quiet_fig, caught, caught_late = simulate(args)
    n = quiet["all"][1]
    print("$ " + " ".join(["python scripts/bench/gate_noise.py"] + list(argv if argv is not None else sys.argv[1:])))
    print("{} nights ({} baselines x {} nights), {} calls per batch size ({}), spread {:.0%}, {:g} % of calls {}-{}x "
          "slower, night drift {:.0%} ({}), baseline up to {:.0%} off; gate: tolerance {:.0%}, k {:g}, {} nights; "
          "seed {}".format(n, args.sequences, args.length, args.calls, args.medians, args.spread, args.outliers * 100,
                           *args.outlier_range, args.drift, args.drift_shape, args.reference_off, args.tolerance,
                           args.k, args.nights, args.seed))
    print()
    print("| no change | nights red | p50 | p99 | throughput |")
    print("|---|---|---|---|---|")
    print("| all nights | {} | {} | {} | {} |".format(pct(*quiet["all"]), *(pct(quiet_fig[f], n) for f in FIGURES)))
    print("| first nights (< {} reference nights) | {} of {} | | | |".format(MIN_NIGHTS, pct(*quiet["early"]), quiet["early"][1]))
    print("| later nights | {} of {} | | | |".format(pct(*quiet["late"]), quiet["late"][1]))
    print()
    print("| step (all calls slower) | p50 caught | p99 caught | throughput caught | night red | p50 caught, later nights |")
    print("|---|---|---|---|---|---|")
    for s, c in caught.items():
        print("| +{:.0%} | {} | {} | {} | {} | {} |".format(s, *(pct(c[f], n) for f in FIGURES), pct(c["night"], n),
                                                       pct(*caught_late[s])))
    print()
    print("({:.0f} s)".format(time.time() - started))
    fa = quiet["all"][0] / n
    ok = fa <= 0.01 and caught[0.10]["p50_ms"] / n >= 0.95 and caught[0.05]["p50_ms"] / n >= 0.80 if (
        0.10 in caught and 0.05 in caught) else fa <= 0.01
    print("goal (false alarms <= 1 %, +10 % p50 >= 95 %, +5 % p50 >= 80 %): {}".format("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
