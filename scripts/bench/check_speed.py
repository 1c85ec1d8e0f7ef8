#!/usr/bin/env python3
"""Wall time of a cold `deploy check MODEL --target jetson_tx2` (goals: MobileNetV2-size graph
<= 0.5 s; a 200,000-node GraphDef <= 5 s, time per node roughly flat from 1k to 200k).

    python scripts/bench/check_speed.py [--model frozen.pb] [--sizes 1000,10000,100000,200000] [--repeat 3]

`--model` is a real frozen graph (e.g. runs/jetson_tx2/freeze/frozen.pb from `deploy run
configs/jetson_tx2.yaml`: MobileNetV2 α 0.35, ~800 nodes). The generated graphs are frozen CNNs
(Const -> Conv2D -> Const -> BiasAdd -> Relu blocks, see graph_read.py). Each check is a fresh
`deploy check` process, timed end to end (interpreter start, imports, read, check, report);
the best of `--repeat` runs is reported.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_read import write_frozen  # noqa: E402


def time_check(path, repeat):
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pipeline", "check", str(path), "--target", "jetson_tx2",
                               "--format", "json"], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        took = time.perf_counter() - start
        if proc.returncode not in (0, 2):
            sys.exit("deploy check failed: " + proc.stderr.decode())
        best = took if best is None else min(best, took)
    nodes = json.loads(proc.stdout)["model"]["nodes"]
    return best, nodes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real frozen graph to time as well")
    parser.add_argument("--sizes", default="1000,10000,100000,200000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    if args.model:
        seconds, nodes = time_check(args.model, args.repeat)
        rows.append({"graph": args.model, "nodes": nodes, "seconds": round(seconds, 3)})
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",") if s):
            path = Path(tmp) / "g{}.pb".format(size)
            write_frozen(path, size)
            seconds, nodes = time_check(path, args.repeat)
            rows.append({"graph": "generated", "nodes": nodes, "seconds": round(seconds, 3)})
            path.unlink()
    for r in rows:
        print("{:<45} {:>7} nodes  {:6.2f} s  {:6.1f} µs/node".format(r["graph"], r["nodes"], r["seconds"],
                                                                     1e6 * r["seconds"] / r["nodes"]))
    print(json.dumps({"benchmark": "check_speed", "repeat": args.repeat, "results": rows}))


if __name__ == "__main__":
    main()
