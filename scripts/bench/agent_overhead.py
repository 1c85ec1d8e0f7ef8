#!/usr/bin/env python3
"""The device agent's timing loop against a bare execute loop on the same backend (goal: <= 2 %).

    python scripts/bench/agent_overhead.py [--size 96] [--batch 1] [--iterations 500] [--repeats 21] [--json]

Both loops run in this process on the same ONNX Runtime session of the same model (a small
classifier built with the onnx package: NHWC input, ReduceMean, MatMul, Softmax — a few-microsecond
call, the worst case for loop overhead; pass --size to make the call heavier):

  bare   for _ in range(n): session.run(None, feed)                     (one perf_counter pair around all)
  agent  the agent's OrtModel.time(feed, 0, n)                           (per-call perf_counter, list of dicts)

Reported: the median over --repeats rounds of each loop's wall time per call, and the overhead as
the median of the per-round ratios agent/bare - 1 (the two alternate within each round, in turn
first, so both see the same machine; per-round ratios cancel slow drifts of a shared machine). On a board the same comparison is
the agent's TensorRT loop against `trtexec --loadEngine` on the same engine (docs/device.md).
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "device"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import numpy as np

    from devicekit import tiny_onnx
    from pipeline.device.agent.runners import OrtModel

    with tempfile.TemporaryDirectory() as tmp:
        path = tiny_onnx(Path(tmp) / "m.onnx", size=args.size)
        model = OrtModel(str(path))
        feed = {"input": np.random.default_rng(0).uniform(0, 255, (args.batch, args.size, args.size, 3)).astype(np.float32)}
        session, n = model.session, args.iterations
        for _ in range(200):
            session.run(None, feed)
        def bare_loop():
            t0 = time.perf_counter()
            for _ in range(n):
                session.run(None, feed)
            return (time.perf_counter() - t0) / n

        def agent_loop():
            t0 = time.perf_counter()
            model.time(feed, 0, n)
            return (time.perf_counter() - t0) / n

        bare, agent = [], []
        for r in range(args.repeats):
            if r % 2:
                agent.append(agent_loop())
                bare.append(bare_loop())
            else:
                bare.append(bare_loop())
                agent.append(agent_loop())
    b, a = statistics.median(bare), statistics.median(agent)
    ratio = statistics.median(x / y for x, y in zip(agent, bare))
    result = {"size": args.size, "batch": args.batch, "iterations": n, "repeats": args.repeats,
              "bare_us_per_call": b * 1e6, "agent_us_per_call": a * 1e6, "overhead_pct": (ratio - 1) * 100}
    if args.json:
        print(json.dumps(result))
    else:
        print("input {s}x{s}x3 batch {b}: bare {bare:.1f} us/call, agent {agent:.1f} us/call, overhead {o:+.2f} %".format(
            s=args.size, b=args.batch, bare=result["bare_us_per_call"], agent=result["agent_us_per_call"],
            o=result["overhead_pct"]))


if __name__ == "__main__":
    main()
