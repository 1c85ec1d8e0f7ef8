#!/usr/bin/env python3
"""The check-side analysis of a 200,000-node graph, in process: patterns.find_patterns (dropout,
batch norm, batch reductions, op families) and batch_flow.batch_axes (issue 20 point 6).

    python scripts/bench/check_patterns_speed.py [--nodes 200000] [--rounds 5]

The graph is check_speed.py's (graph_read.write_frozen: frozen-CNN blocks, deploy's own protobuf
module, no TensorFlow), read once; each function runs ``--rounds`` times with the cyclic GC off (as
check_model runs it) and the median is reported, with `uptime`'s load before and after (figures
from a loaded machine are not comparable). One JSON line at the end for tooling.
"""

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_read import write_frozen  # noqa: E402


def _load():
    return " ".join("{:.2f}".format(x) for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from pipeline.check.batch_flow import batch_axes
    from pipeline.check.patterns import find_patterns
    from pipeline.graph import read_model

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.pb"
        write_frozen(path, args.nodes)
        graph = read_model(path)
    before = _load()
    gc.disable()
    times = {"batch_axes": [], "find_patterns": []}
    for _ in range(args.rounds):
        for name, func in (("batch_axes", batch_axes), ("find_patterns", find_patterns)):
            start = time.perf_counter()
            func(graph)
            times[name].append(time.perf_counter() - start)
    gc.enable()
    result = {name: round(statistics.median(t), 3) for name, t in times.items()}
    for name, t in result.items():
        print("{:<14} {:.3f} s (median of {})".format(name, t, args.rounds))
    print("load average before: {}, after: {}".format(before, _load()))
    print(json.dumps(dict(result, nodes=len(graph.nodes), load_before=before, load_after=_load())))


if __name__ == "__main__":
    main()
