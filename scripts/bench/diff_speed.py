#!/usr/bin/env python3
"""Wall time of `deploy diff A B` on big graphs (goal: 200,000 nodes <= 5 s).

    python scripts/bench/diff_speed.py [--sizes 10000,100000,200000] [--repeat 3]

A is a generated frozen CNN (see graph_read.py). Two diffs per size: A against itself, and A
against a copy with every node renamed and the node order reversed, so nothing can be matched by
name or position: the diff must find "structurally identical up to renaming" from structure
alone. Each diff is a fresh `deploy diff` process timed end to end; the best of --repeat is
reported.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_read import write_frozen  # noqa: E402


def renamed_copy(src, dst):
    from pipeline.graph import proto

    graph = proto.GraphDef()
    graph.ParseFromString(src.read_bytes())
    names = {n.name: "n{:07d}".format(i) for i, n in enumerate(reversed(graph.node))}
    out = proto.GraphDef()
    for node in reversed(graph.node):
        new = out.node.add()
        new.CopyFrom(node)
        new.name = names[node.name]
        del new.input[:]
        for t in node.input:
            name, sep, port = t.lstrip("^").partition(":")
            new.input.append(("^" if t.startswith("^") else "") + names[name] + sep + port)
    dst.write_bytes(out.SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,200000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            a, b = Path(tmp) / "a.pb", Path(tmp) / "b.pb"
            write_frozen(a, size)
            renamed_copy(a, b)
            for against, other in (("itself", a), ("renamed copy", b)):
                best, out = None, None
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    proc = subprocess.run([sys.executable, "-m", "pipeline", "diff", str(a), str(other), "--format",
                                           "json"], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    took = time.perf_counter() - start
                    best = took if best is None else min(best, took)
                    out = proc
                data = json.loads(out.stdout)
                rows.append({"nodes": data["nodes"]["a"], "against": against, "seconds": round(best, 2),
                             "identical_up_to_renaming": data["identical_up_to_renaming"],
                             "renamed": len(data["renamed"])})
                print("{:>7} nodes vs {:<12}  {:6.2f} s  identical up to renaming: {}  ({} renamed)".format(
                    rows[-1]["nodes"], against, best, data["identical_up_to_renaming"], len(data["renamed"])))
    print(json.dumps({"benchmark": "diff_speed", "repeat": args.repeat, "results": rows}))


if __name__ == "__main__":
    main()
