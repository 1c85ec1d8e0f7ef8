#!/usr/bin/env python3
"""How long `deploy estimate` takes, end to end in a fresh process (issue 30 item 5: a MobileNet-size graph in
well under a second, a 200,000-node graph in a few seconds; no TensorFlow, TensorRT or GPU).

    python scripts/bench/estimate_speed.py [--nodes 200000] [--rounds 3] [--model frozen.pb ...] [--profile]
                                           [--baseline DIR]

The 200,000-node graph is graph_read.py's (frozen-CNN blocks Const -> Conv2D -> Const -> BiasAdd -> Relu,
written with deploy's own protobuf module, no TensorFlow). ``--model`` times models of yours too (e.g. a
MobileNetV2 frozen with convert_variables_to_constants_v2). Each timing is `deploy estimate MODEL --target
jetson_nano --format json` in a fresh process (interpreter start, imports, read, estimate, print); the
median of ``--rounds`` is reported with the process's CPU time, and `uptime`'s load average (a shared
machine's wall times are not comparable: CPU time is the figure it disturbs least). One JSON line at the end.
``--baseline DIR``: DIR is a copy of the tree from before a change (``git archive COMMIT | tar -x -C DIR``); each
round times DIR's ``deploy estimate`` and this tree's one after the other (the load moves between rounds, less
within one), and their outputs must be byte-identical, or the script stops saying which model differs.
``--profile``: also estimate the big graph once in this process under cProfile and print the 20 functions that
take the most time of their own (where to look next; the profiler slows Python calls, so its seconds are not
the estimate's).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "bench"))


def run_once(model, tree=ROOT):
    """(wall s, CPU s, stdout) of one ``deploy estimate MODEL`` in a fresh process, run from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipeline", "estimate", str(model), "--target", "jetson_nano",
                           "--format", "json"], cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit("deploy estimate {} failed ({}): {}".format(model, tree, done.stderr.strip()))
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.stdout


def time_estimate(model, rounds):
    runs = [run_once(model) for _ in range(rounds)]
    report = json.loads(runs[-1][2])
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), report["layers"]


def compare(model, rounds, baseline):
    """Rounds of (baseline, this tree), alternately: {"before"/"after": [(wall, cpu)...]}; outputs must match."""
    times = {"before": [], "after": []}
    for _ in range(rounds):
        for side, tree in (("before", baseline), ("after", ROOT)):
            wall, cpu, out = run_once(model, tree)
            times[side].append((round(wall, 3), round(cpu, 3)))
            if side == "before":
                expected = out
            elif out != expected:
                raise SystemExit("{}: this tree's estimate differs from {}'s".format(model, baseline))
    return times


def profile(model):
    import cProfile
    import pstats

    from pipeline.estimate import estimate_model

    profiler = cProfile.Profile()
    profiler.runcall(estimate_model, str(model), ["jetson_nano"])
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--profile", action="store_true", help="cProfile one in-process estimate of the big graph")
    parser.add_argument("--baseline", type=Path, help="a copy of the tree before a change: timed alternately with this "
                        "one, outputs compared byte for byte")
    args = parser.parse_args()
    from graph_read import write_frozen

    print("load average before:", os.getloadavg())
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.pb"
        nodes = write_frozen(big, args.nodes)
        for name, path in [("{} nodes".format(nodes), big)] + [(m, Path(m).resolve()) for m in args.model]:
            if args.baseline:
                times = compare(path, args.rounds, args.baseline.resolve())
                results[name] = times
                for side in ("before", "after"):
                    print("{} {}: CPU {} s, wall {} s (identical output)".format(
                        name, side, " ".join(str(c) for _, c in times[side]), " ".join(str(w) for w, _ in times[side])))
                continue
            wall, cpu, layers = time_estimate(path, args.rounds)
            results[name] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "layers": layers}
            print("{}: {:.2f} s wall, {:.2f} s CPU ({} engine layers; median of {})".format(
                name, wall, cpu, layers, args.rounds))
        if args.profile:
            profile(big)
    print("load average after:", os.getloadavg())
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
