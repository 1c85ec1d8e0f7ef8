#!/usr/bin/env python
"""How much does the latency harness add over a bare ``sess.run`` loop?

Builds a small Conv/Relu ONNX model (or takes ``--model path.onnx``), loads it once with
``pipeline.backends.load_onnx`` (ONNX Runtime, CPU), and times two loops of ``--iterations``
calls (default 100, the benchmark stage's default) on the same session, input and batch:

  bare     for _ in range(n): ort_session.run(output_names, feed)
  harness  with Progress("human", stream=devnull).bar(total=n) as bar:   # a real tqdm bar
               OrtModel.time(feed, 0, n, progress=bar.update)   # the runners' timing loop, the benchmark's own
           (bar creation and close included, exactly as the stage uses it per batch size)

The loops are interleaved finely so both see the same machine: a round is ``--cycles`` ABBA
cycles (bare, harness, harness, bare), and a round's figures compare the summed times of its
bare and harness loops. Reported, as the median over ``--rounds`` rounds:

  overhead_pct   harness wall time / bare wall time - 1   (what the harness costs the loop)
  bias_pct       harness's reported mean latency / bare per-call time - 1
                 (whether the reported numbers are inflated)

Usage: .venv/bin/python scripts/bench/harness_overhead.py [--model m.onnx] [--batch 1]
       [--iterations 100] [--cycles 5] [--rounds 9] [--layers 6] [--size 64] [--channels 32]
Prints a table and, last, one JSON line.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from pipeline.bench.latency import summarize  # noqa: E402
from pipeline.device.agent.runners import OrtModel  # noqa: E402
from pipeline.progress import Progress  # noqa: E402
from pipeline.backends import load_onnx  # noqa: E402


def build_model(path, layers=6, size=64, channels=32, seed=0):
    """x[N,3,size,size] -> (Conv3x3 + Relu) * layers -> GlobalAveragePool; dynamic batch dim."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev, cin = "x", 3
    for i in range(layers):
        w = (rng.standard_normal((channels, cin, 3, 3)) * (2.0 / (cin * 9)) ** 0.5).astype(np.float32)
        b = np.zeros(channels, np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        prev, cin = f"r{i}", channels
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["y"]))
    graph = helper.make_graph(
        nodes,
        "harness_overhead",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", channels, 1, 1])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def loops(call, n, progress, desc, native=None, feed=None):
    """The two loops compared: (bare, harness), each returning (seconds, per-call times or None).
    The harness is the benchmark's timing loop, ``OrtModel.time``, on ``native`` (an InferenceSession),
    else on a stand-in session whose ``run`` is ``call``."""
    clock = time.perf_counter
    timer = OrtModel.__new__(OrtModel)
    timer.session = native if native is not None else types.SimpleNamespace(run=lambda names, feed: call())

    def bare():
        t0 = clock()
        for _ in range(n):
            call()
        return clock() - t0, None

    def harness():
        t0 = clock()
        with progress.bar(total=n, desc=desc, unit="it") as bar:
            times = [c["total_ms"] / 1e3 for c in timer.time(feed, 0, n, progress=bar.update)]
        return clock() - t0, times

    return bare, harness


def abba_round(bare, harness, cycles):
    """One round of ``cycles`` ABBA cycles: (bare seconds, harness seconds, harness times)."""
    # ABBA: a linear drift (clock, thermals, neighbours) cancels out of the ratio instead of
    # landing on whichever loop runs second.
    b_s = h_s = 0.0
    times = []
    for f in [bare, harness, harness, bare] * cycles:
        elapsed, t = f()
        if t is None:
            b_s += elapsed
        else:
            h_s += elapsed
            times += t
    return b_s, h_s, times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="an .onnx file (default: build a small Conv/Relu model)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=100, help="calls per loop (stage default: 100)")
    ap.add_argument("--cycles", type=int, default=5, help="ABBA cycles per round")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--channels", type=int, default=32)
    args = ap.parse_args(argv)

    import numpy as np

    n = args.iterations
    progress = Progress("human", stream=open(os.devnull, "w"), bars=True)  # draw the bar, as on a terminal
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or build_model(Path(tmp) / "harness.onnx", args.layers, args.size, args.channels)
        session = load_onnx(path)
        rng = np.random.RandomState(0)  # the benchmark's feed: uniform 0..255 from a fixed seed
        feed = {name: rng.uniform(0.0, 255.0, size=(args.batch,) + tuple(shape[1:])).astype(np.float32).astype(dtype)
                for name, shape, dtype in session.inputs}
        ort_run, names = session.native.run, session.output_names
        for _ in range(20):  # warm up
            ort_run(names, feed)

        # 1. The model: bare ort_session.run(names, feed) vs OrtModel.time on the same session.
        bare, harness = loops(None, n, progress, f"benchmark b{args.batch}", native=session.native, feed=feed)
        bare = loops(lambda: ort_run(names, feed), n, progress, "")[0]
        print(
            f"model {Path(path).name}, batch {args.batch}, {session.label['provider']},"
            f" {n} calls per loop, {args.cycles} ABBA cycles per round, {args.rounds} rounds",
            flush=True,
        )
        print(f"{'round':>5} {'bare ms/call':>13} {'harness ms/call':>16} {'overhead %':>11} {'bias %':>8}")
        overheads, biases, bare_ms, harness_ms, p50s = [], [], [], [], []
        calls = 2 * args.cycles * n
        for r in range(args.rounds):
            b_s, h_s, times = abba_round(bare, harness, args.cycles)
            overheads.append((h_s / b_s - 1) * 100)
            biases.append((sum(times) / len(times) / (b_s / calls) - 1) * 100)
            bare_ms.append(b_s / calls * 1e3)
            harness_ms.append(h_s / calls * 1e3)
            p50s.append(summarize(times, args.batch)["p50_ms"])
            print(
                f"{r:>5} {bare_ms[-1]:>13.4f} {harness_ms[-1]:>16.4f} {overheads[-1]:>11.2f} {biases[-1]:>8.2f}",
                flush=True,
            )

        # 2. The harness alone, with a call that costs ~nothing: its absolute cost per call (bar
        #    creation and close amortized over ``n`` calls, as in use), far less noisy than (1).
        def noop():
            return None

        bare0, harness0 = loops(noop, n, progress, "noop")
        per_call_ns = []
        for _ in range(args.rounds):
            b_s, h_s, _ = abba_round(bare0, harness0, 50)
            per_call_ns.append((h_s - b_s) / (2 * 50 * n) * 1e9)
        cost_ns = statistics.median(per_call_ns)
        model_ms = statistics.median(bare_ms)

        result = {
            "model": str(args.model) if args.model else f"conv{args.layers}x{args.channels}@{args.size}",
            "batch_size": args.batch,
            "provider": session.label["provider"],
            "cpu_count": session.label["host"]["cpu_count"],
            "calls_per_loop": n,
            "abba_cycles_per_round": args.cycles,
            "rounds": args.rounds,
            "bare_ms_per_call_median": round(model_ms, 4),
            "harness_ms_per_call_median": round(statistics.median(harness_ms), 4),
            "harness_p50_ms_median": round(statistics.median(p50s), 4),
            "overhead_pct_median": round(statistics.median(overheads), 3),
            "overhead_pct_min": round(min(overheads), 3),
            "overhead_pct_max": round(max(overheads), 3),
            "bias_pct_median": round(statistics.median(biases), 3),
            "harness_cost_ns_per_call": round(cost_ns, 1),
            "harness_cost_pct_of_model": round(cost_ns / (model_ms * 1e6) * 100, 4),
        }
        print(
            f"harness overhead on this model: {result['overhead_pct_median']:+.2f} % (median of {args.rounds}"
            f" rounds; range {result['overhead_pct_min']:+.2f} .. {result['overhead_pct_max']:+.2f} %)"
        )
        print(
            f"harness cost per call (no-op call): {cost_ns:.0f} ns ="
            f" {result['harness_cost_pct_of_model']:.3f} % of a {model_ms:.3f} ms call"
        )
        print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
