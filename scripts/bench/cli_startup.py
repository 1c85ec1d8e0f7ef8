#!/usr/bin/env python3
"""How long `deploy --help` and `deploy validate` take to start (goal: <= 0.5 s wall each).

    python scripts/bench/cli_startup.py [--repeat 10]

Runs each command in a fresh interpreter `--repeat` times and prints min / median / max wall
seconds, plus one JSON line for tooling.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "deploy --help": ["--help"],
    "deploy validate configs/jetson_tx2.yaml": ["validate", "configs/jetson_tx2.yaml"],
    "deploy targets": ["targets"],
}


def time_command(argv, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pipeline", *argv], cwd=str(ROOT), stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    results = {}
    for name, argv in COMMANDS.items():
        times = time_command(argv, args.repeat)
        results[name] = {"min_s": round(min(times), 3), "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
        print("{:<45} min {min_s:.3f} s  median {median_s:.3f} s  max {max_s:.3f} s".format(name, **results[name]))
    print(json.dumps({"benchmark": "cli_startup", "repeat": args.repeat, "results": results}))


if __name__ == "__main__":
    main()
