"""How often is the nightly gate red for nothing, and how soon does it catch a real slowdown?

Drives `deploy compare` through the CLI's own entry (``pipeline.cli.main``, in-process) night after night,
as the nightly workflow does (.github/workflows/nightly-jetson.yml, "Compare with the reference" and "Keep
tonight"): a baseline night, then each night written as a run folder (run.json, benchmark/benchmark.json
summarized by the real ``pipeline.bench.latency.summarize``), judged with
``deploy compare BASELINE NIGHT --history <the kept nights> -o NIGHT/comparison.json``, a ``FAILED`` file
added when the exit code is not 0, and the night kept. The gate's own reader picks the reference and reads
the previous nights' comparison.json for the persistence rule. (The workflow keeps 30 nights; this passes the
last 22, which the reference of 19 nights, the window's last two nights and its reference before them need, to
save time.)

The noise (per board and night):

- per call: log-normal spread (``--spread``, sigma of ln, default 3 %); ``--outliers`` of the calls
  (default 1 %) slowed ``--outlier-range`` times (default 1.5-3x); ``--calls`` calls per batch size;
- per night, one level for every call: ``--drift normal`` (log-normal, sigma 2 % of ln), ``t3`` (Student-t,
  3 degrees of freedom, scale 1.5 % of ln: heavy tails) or ``uniform`` (1 + U(-2 %, +2 %)); ``all`` runs
  the three. The baseline night is a night like the others.

What is counted (each with its Wilson 95 % interval):

- false alarms: unchanged nights whose exit code is not 0 (red), of all unchanged nights;
- a step (all calls of every batch size slower by +5 %, +10 %, +25 %) that starts on a night and stays:
  the share red (a regression) on its first night (+25 %), by its second night (+10 %), within three
  nights (+5 %). Steps start on every ``--step-every``-th night of each sequence, from the night's own
  drift onward (the same draws as the unchanged nights, scaled), in a branch of the history.

The goal (issue 28): false alarms <= 1 % with the interval's upper end <= 2 %; +10 % by its second night
>= 95 %; +25 % on its first night >= 99 %; +5 % within three nights >= 90 %. Each line says met or NOT
met by its point estimate, and the false-alarm line by its upper end too.

    python scripts/bench/gate_noise.py --drift all           # 3 x 20 sequences x 30 nights
    python scripts/bench/gate_noise.py --drift t3 --sequences 10 --length 12

Seeded and deterministic: the same arguments print the same figures (the timing line aside).
"""

import argparse
import contextlib
import io
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pipeline.bench.latency import summarize  # noqa: E402
from pipeline.cli import main as deploy  # noqa: E402

FINGERPRINT = {"kind": "jetson", "board": "jetson_tx2", "model": "NVIDIA Jetson TX2", "l4t": "32.7.6",
               "jetpack": "4.6.6", "tensorrt": "8.2.1", "cuda": "10.2",
               "power_mode": {"mode_name": "MAXN", "mode_id": 0}, "clocks_locked": True}
DRIFTS = ("normal", "t3", "uniform")
GOALS = {0.25: (1, 0.99), 0.10: (2, 0.95), 0.05: (3, 0.90)}  # step: (caught by night, share)
KEEP = 22  # the workflow keeps 30 nights; the reference reads 19 of them, the window the last 2 and the 19 before


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--drift", choices=DRIFTS + ("all",), default="all")
    p.add_argument("--sequences", type=int, default=20, help="baselines per drift model (default 20)")
    p.add_argument("--length", type=int, default=30, help="nights after each baseline (default 30)")
    p.add_argument("--step-every", type=int, default=3, help="a step starts on every n-th night (default 3)")
    p.add_argument("--calls", type=int, default=1000, help="timed calls per batch size and night (default 1000)")
    p.add_argument("--medians", default="1:4,8:20", help="batch size:median ms, ... (default 1:4,8:20)")
    p.add_argument("--spread", type=float, default=0.03)
    p.add_argument("--outliers", type=float, default=0.01)
    p.add_argument("--outlier-range", type=float, nargs=2, default=(1.5, 3.0))
    p.add_argument("--steps", default="0.05,0.10,0.25")
    p.add_argument("--latency-tolerance", default="0.03", help="passed to deploy compare (the workflow's default)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def level(rng, drift):
    """One night's level (a factor on every call)."""
    if drift == "normal":
        return math.exp(rng.normal(0.0, 0.02))
    if drift == "t3":
        return math.exp(0.015 * rng.standard_t(3))
    return 1.0 + rng.uniform(-0.02, 0.02)


def calls(rng, args, median_ms):
    """Per-call seconds of one batch size on one night, at level 1."""
    t = median_ms / 1000.0 * np.exp(rng.normal(0.0, args.spread, args.calls))
    slow = rng.random(args.calls) < args.outliers
    t[slow] *= rng.uniform(args.outlier_range[0], args.outlier_range[1], int(slow.sum()))
    return t


def write_night(folder, day, samples, factor):
    """A run folder as a night leaves it: run.json and benchmark/benchmark.json (the keys deploy compare reads)."""
    when = "2026-{:02d}-{:02d}T02:00:00+0000".format(1 + (day - 1) // 28, 1 + (day - 1) % 28)
    (folder / "benchmark").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"schema": "deploy.run/1", "run": "jetson_tx2", "target": "jetson_tx2",
                                                 "started": when, "finished": when, "exit_code": 0, "stages": []}))
    results = [dict(summarize(list(t * factor), bs), batch_size=bs) for bs, t in samples.items()]
    bench = {"schema": "deploy.benchmark/1", "results": results,
             "where": {"runtime": "tensorrt", "version": "8.2.1", "target": "jetson_tx2", "on_target_device": True,
                       "fingerprint": dict(FINGERPRINT)}}
    (folder / "benchmark" / "benchmark.json").write_text(json.dumps(bench))
    return folder


def judge(baseline, night, kept, tolerance):
    """deploy compare as the workflow runs it; the night's FAILED file when red. Returns the exit code."""
    argv = ["compare", str(baseline), str(night)] + (["--history"] + [str(k) for k in kept[-KEEP:]] if kept else [])
    argv += ["--latency-tolerance", tolerance, "--format", "json", "-o", str(night / "comparison.json")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = deploy(argv)
    if code not in (0, 4):
        raise SystemExit("deploy compare exit {}: {}".format(code, err.getvalue().strip()))
    if code != 0:
        (night / "FAILED").write_text("gate: deploy compare exit {}\n".format(code))
    return code


def simulate(args, drift, root):
    rng = np.random.default_rng([args.seed, DRIFTS.index(drift)])
    medians = {int(a): float(b) for a, b in (x.split(":") for x in args.medians.split(","))}
    steps = [float(s) for s in args.steps.split(",")]
    quiet = [0, 0]
    caught = {s: [0, 0] for s in steps}
    for seq in range(args.sequences):
        home = root / drift / "s{}".format(seq)
        nights = args.length + 1 + max(GOALS.get(s, (1,))[0] for s in steps)
        levels = [level(rng, drift) for _ in range(nights)]
        samples = [{bs: calls(rng, args, m) for bs, m in medians.items()} for _ in range(nights)]
        baseline = write_night(home / "baseline", 1, samples[0], levels[0])
        kept = []
        for t in range(1, args.length + 1):
            night = write_night(home / "n{:03d}".format(t), 1 + t, samples[t], levels[t])
            red = judge(baseline, night, kept, args.latency_tolerance) != 0
            quiet[0] += red
            quiet[1] += 1
            if t % args.step_every == 0:
                for s in steps:
                    by = GOALS.get(s, (3,))[0]
                    branch, hit = list(kept), False
                    for j in range(by):
                        stepped = write_night(home / "step{}-{}-{}".format(s, t, j), 1 + t + j, samples[t + j],
                                              levels[t + j] * (1 + s))
                        if judge(baseline, stepped, branch, args.latency_tolerance) != 0:
                            hit = True
                            break
                        branch.append(stepped)
                    caught[s][0] += hit
                    caught[s][1] += 1
                    for j in range(by):
                        shutil.rmtree(str(home / "step{}-{}-{}".format(s, t, j)), ignore_errors=True)
            kept.append(night)
    return quiet, caught


def wilson(k, n, z=1.96):
    if not n:
        return 0.0, 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)


def share(k, n):
    p, lo, hi = wilson(k, n)
    return "{:.1f} % ({}/{}; {:.1f}-{:.1f})".format(100 * p, k, n, 100 * lo, 100 * hi)


def main(argv=None):
    args = parse(argv)
    drifts = DRIFTS if args.drift == "all" else (args.drift,)
    started = time.time()
    print("$ " + " ".join(["python scripts/bench/gate_noise.py"] + list(argv if argv is not None else sys.argv[1:])))
    print("{} sequences x {} nights per drift model, {} calls per batch size ({}), call spread {:.0%}, {:g} % of calls "
          "{}-{}x slower; steps start every {} nights; deploy compare --latency-tolerance {} (k, nights: its "
          "defaults); seed {}".format(args.sequences, args.length, args.calls, args.medians, args.spread,
                                      args.outliers * 100, *args.outlier_range, args.step_every,
                                      args.latency_tolerance, args.seed))
    print()
    steps = [float(s) for s in args.steps.split(",")]
    print("| drift | false alarms (red, unchanged nights) | " + " | ".join(
        "+{:.0%} caught by night {}".format(s, GOALS.get(s, (3,))[0]) for s in steps) + " |")
    print("|---|---|" + "---|" * len(steps))
    met = True
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="gate-noise-") as tmp:
        for drift in drifts:
            quiet, caught = simulate(args, drift, Path(tmp))
            print("| {} | {} | {} |".format(drift, share(*quiet), " | ".join(share(*caught[s]) for s in steps)))
            p, _, hi = wilson(*quiet)
            ok = p <= 0.01 and hi <= 0.02
            verdicts.append("{}: false alarms {} (<= 1 %, upper end <= 2 %)".format(drift, "met" if ok else "NOT met"))
            met &= ok
            for s in steps:
                if s in GOALS:
                    by, goal = GOALS[s]
                    ok = caught[s][1] and caught[s][0] / caught[s][1] >= goal
                    verdicts.append("{}: +{:.0%} by night {} {} (>= {:.0%})".format(drift, s, by, "met" if ok else "NOT met",
                                                                                  goal))
                    met &= bool(ok)
    print()
    for line in verdicts:
        print("- " + line)
    print()
    print("({:.0f} s)".format(time.time() - started))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
