#!/usr/bin/env python3
"""Wall time of a re-check answered from the check cache (issue 26 item 1: <= 0.5 s), beside `deploy --help`.

    python scripts/bench/check_cache_hit.py MODEL [--target jetson_tx2] [--rounds 7] [--baseline DIR] [--tree DIR]

The first check of MODEL (a miss: tf2onnx runs, not timed) stores the answer in a temporary cache; then
`--rounds` rounds each time a fresh `deploy check MODEL -q` (a hit) and `deploy --help`. `--baseline DIR`: a
copy of another version's `pipeline/` and `targets/` (e.g. `git archive HEAD~1 pipeline targets | tar -x -C DIR`),
run with PYTHONPATH=DIR in the same rounds, alternating, so both see the same load (`--tree DIR`: such a copy stands for this tree, so that editing the source
while it runs, which changes the cache key, does not spoil it). Each tree's pipeline/ is byte-compiled
first (compileall), as an installed deploy is. The load average is
printed before and after: on a shared machine say it with the figures.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def timed(argv, env):
    start = time.perf_counter()
    # not run from a checkout: `python -m` puts the working directory first on sys.path
    res = subprocess.run(argv, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if res.returncode not in (0, 2):
        sys.exit("failed ({}): {}\n{}".format(res.returncode, " ".join(argv), res.stderr))
    return seconds, res.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--target", default="jetson_tx2")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", help="a folder holding another version's pipeline/ and targets/")
    parser.add_argument("--tree", default=str(ROOT), help="a folder holding this version's (default: this checkout)")
    args = parser.parse_args()
    args.model = str(Path(args.model).resolve())
    trees = [("this tree", str(Path(args.tree).resolve()))] + ([("baseline", str(Path(args.baseline).resolve()))] if args.baseline else [])
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-check-hit-") as cache:
        envs = {}
        for name, tree in trees:  # byte-compiled first, as an installed deploy is (PYTHONDONTWRITEBYTECODE or not)
            subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(tree, "pipeline")], check=True)
            env = dict(os.environ, PYTHONPATH=tree, DEPLOY_CHECK_CACHE_DIR=os.path.join(cache, name.replace(" ", "_")))
            env.pop("DEPLOY_CHECK_CACHE", None)
            envs[name] = env
            _, err = timed([sys.executable, "-m", "pipeline", "check", args.model, "--target", args.target, "-q"], env)
            _, err = timed([sys.executable, "-m", "pipeline", "check", args.model, "--target", args.target], env)
            if "the answer from the check cache" not in err:
                sys.exit("{}: the second check was not a cache hit:\n{}".format(name, err))
        hits = {name: [] for name, _ in trees}
        helps = []
        for _ in range(args.rounds):
            for name, _ in trees:
                hits[name].append(timed([sys.executable, "-m", "pipeline", "check", args.model, "--target",
                                         args.target, "-q"], envs[name])[0])
            helps.append(timed([sys.executable, "-m", "pipeline", "--help"], envs[trees[0][0]])[0])
    for name, _ in trees:
        print("{:<10} cache hit: median {:.3f} s (min {:.3f}, max {:.3f}; {} runs)".format(
            name, statistics.median(hits[name]), min(hits[name]), max(hits[name]), len(hits[name])))
    print("deploy --help: median {:.3f} s (min {:.3f}, max {:.3f})".format(statistics.median(helps), min(helps), max(helps)))
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
