#!/usr/bin/env python3
"""Wall time of re-running an unchanged config whose stages are all cached (goal: <= 3 s).

    python scripts/bench/cached_rerun.py [--config configs/jetson_tx2.yaml] [--repeat 5] [--quick]

The first run (not timed) trains and converts into a temporary run directory; then the same
command is re-run `--repeat` times, each a fresh `deploy run` process, alternating with `--no-report`
runs, and the wall times of both are reported: their difference is what writing report.html costs
an unchanged run (its plots cached). The run directory is relative (`run.dir: runs`, as in the shipped
configs), the working directory a temporary folder. `--quick` shrinks the config (tiny dataset, 1 epoch) to get there faster; the cached
re-run does the same work either way (config, dataset fingerprint, manifests, no TensorFlow).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["model.input_size=32", "stages.train.epochs=1", "dataset.train_per_class=6", "dataset.val_per_class=2",
         "stages.benchmark.iterations=5"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/jetson_tx2.yaml")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="shrink the config for a faster first run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sets = ["run.dir=runs", "dataset.path={}/data".format(tmp)] + (QUICK if args.quick else [])
        cmd = [sys.executable, "-m", "pipeline", "run", str(ROOT / args.config), "--quiet"]
        for s in sets:
            cmd += ["--set", s]
        start = time.perf_counter()
        subprocess.run(cmd, cwd=tmp, check=True)
        first = time.perf_counter() - start
        times, bare = [], []
        for _ in range(args.repeat):
            for command, into in ((cmd, times), (cmd + ["--no-report"], bare)):
                start = time.perf_counter()
                subprocess.run(command, cwd=tmp, check=True)
                into.append(time.perf_counter() - start)

    def stats(values):
        return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}

    print("first run {:.1f} s; cached re-run: min {:.2f} s  median {:.2f} s  max {:.2f} s ({} runs); "
          "with --no-report: median {:.2f} s".format(first, min(times), statistics.median(times), max(times), args.repeat,
                                                     statistics.median(bare)))
    print(json.dumps({"benchmark": "cached_rerun", "config": args.config, "quick": args.quick, "first_run_s": round(first, 2),
                      "rerun_s": stats(times), "rerun_no_report_s": stats(bare)}))

if __name__ == "__main__":
    main()
