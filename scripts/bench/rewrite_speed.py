#!/usr/bin/env python3
"""ONNX Runtime speed of the rewritten model against tf2onnx's output and onnxslim's, side by side.

    python scripts/bench/rewrite_speed.py --frozen runs/jetson_tx2/freeze/frozen.pb [--rewritten model.onnx]
        [--batches 1,8] [--rounds 7] [--iterations 50] [--warmup 20] [--threads 1] [--tolerance 0.03]
        [--ort-optimizations all|basic|none] [--save DIR] [--check]

Goal (issue): on the shipped mobilenet_v2 model, the ONNX model produced after rewrite runs in
ONNX Runtime at least as fast as tf2onnx's output of the unrewritten frozen graph, and no slower
than the same model after onnxslim.

The three models: `tf2onnx` = tf2onnx.convert.from_graph_def of the frozen graph at `--opset`
(13, what TensorRT 8.2 parses), inputs/outputs from the io.json beside it; `onnxslim` =
onnxslim.slim(tf2onnx); `rewritten` = `--rewritten` if given, else the shipped configs' rewrite
passes (fold_constants, fold_batchnorm, fold_pad) on the frozen graph, then tf2onnx. All three are
first run once on the same input and must agree (max |diff| printed; > 1e-4 stops the run).

Timing: one CPU InferenceSession per model, identical SessionOptions (`--threads` intra-op
threads, default 1, 0 = ONNX Runtime's default; sequential execution; `--ort-optimizations`,
default all), one fixed random input per batch size, `--warmup` runs per session, then `--rounds`
interleaved rounds (the model order rotates every round) of `--iterations` timed runs each. Reported: median and p90
of every single run's wall time, and the ratio rewritten / other of the medians. "ok" means
rewritten's median <= other's median * (1 + `--tolerance`). Prints a table and one JSON line;
`--check` exits 1 when a goal fails.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MODELS = ("tf2onnx", "onnxslim", "rewritten")
SHIPPED_PASSES = ("fold_constants", "fold_batchnorm", "fold_pad")  # configs/base.yaml's rewrite stage


def build_models(frozen, rewritten, opset):
    """{name: ModelProto} for the three models, and {pass: sites} when the rewritten model is made here."""
    import onnx

    from pipeline.convert import to_onnx
    from pipeline.tf.graph import load_graph_def

    io_path = Path(frozen).with_name("io.json")
    if not Path(frozen).is_file():
        sys.exit("no frozen graph {}".format(frozen))
    if not io_path.is_file():
        sys.exit("no io.json beside {} (the freeze stage writes it)".format(frozen))
    io = json.loads(io_path.read_text())
    converted = to_onnx(load_graph_def(frozen), io, opset)
    import onnxslim

    slimmed = onnxslim.slim(_copy(converted))
    if rewritten:
        ours, sites = onnx.load(str(rewritten)), None
    else:  # what the shipped configs' rewrite stage does, then the same conversion
        import numpy as np

        from pipeline.rewrite.apply import apply_passes
        from pipeline.rewrite.tfgraph import TFGraph
        from pipeline.tf import import_tf

        graph = TFGraph.load(frozen)
        shape = io["inputs"][0]["shape"]
        samples = np.random.RandomState(0).uniform(0, 255, [2] + list(shape[1:])).astype("float32")
        receipt = apply_passes(graph, json.loads(json.dumps(io)), list(SHIPPED_PASSES), {}, samples)
        sites = {entry["pass"]: entry["sites"] for entry in receipt}
        ours = to_onnx(import_tf().compat.v1.GraphDef.FromString(graph.serialize()), io, opset)
    return {"tf2onnx": converted, "onnxslim": slimmed, "rewritten": ours}, sites


def _copy(model):
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def sessions(models, threads, level):
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = {"all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                     "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                     "none": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL}[level]
    return {name: onnxruntime.InferenceSession(model.SerializeToString(), sess_options=opts,
                                               providers=["CPUExecutionProvider"])
            for name, model in models.items()}


def make_input(sess, batch, seed):
    import numpy as np

    arg = sess.get_inputs()[0]
    if len(sess.get_inputs()) != 1 or arg.type != "tensor(float)":
        sys.exit("this benchmark feeds one float input; the model has {}".format(
            [(i.name, i.type) for i in sess.get_inputs()]))
    shape = [batch] + [d if isinstance(d, int) else 1 for d in arg.shape[1:]]
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def agree(sess, data):
    """Max |difference| of every model's outputs from tf2onnx's on the same input."""
    import numpy as np

    outs = {}
    for name, s in sess.items():
        outs[name] = s.run(None, {s.get_inputs()[0].name: data})
    ref = outs["tf2onnx"]
    return {name: max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) for a, b in zip(ref, got))
            for name, got in outs.items() if name != "tf2onnx"}


def time_batch(sess, data, rounds, iterations, warmup):
    """{name: [seconds per run]} over interleaved rounds; the model order rotates every round."""
    runs = {}
    for name, s in sess.items():
        feed = {s.get_inputs()[0].name: data}
        out_names = [o.name for o in s.get_outputs()]
        runs[name] = (s.run, out_names, feed)
        for _ in range(warmup):
            s.run(out_names, feed)
    times = {name: [] for name in sess}
    order = list(sess)
    for r in range(rounds):
        for name in order[r % len(order):] + order[:r % len(order)]:
            run, out_names, feed = runs[name]
            clock = time.perf_counter
            for _ in range(iterations):
                start = clock()
                run(out_names, feed)
                times[name].append(clock() - start)
    return times


def p90(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def describe(model):
    ops = {}
    for node in model.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    return {"nodes": len(model.graph.node), "bytes": model.ByteSize(), "ops": dict(sorted(ops.items()))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frozen", required=True, help="frozen.pb with its io.json beside it")
    parser.add_argument("--rewritten", help="the rewrite stage's .onnx (default: the shipped rewrite passes, then tf2onnx; "
                                            "on tf2onnx's output)")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=50, help="timed runs per model per round")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads (default 1: steadier on a shared machine; 0: ONNX Runtime's default)")
    parser.add_argument("--tolerance", type=float, default=0.03,
                        help="noise allowed in 'at least as fast' (0.03 = 3%%)")
    parser.add_argument("--ort-optimizations", choices=("all", "basic", "none"), default="all",
                        help="ONNX Runtime graph optimizations (none: time the graphs as written)")
    parser.add_argument("--save", help="write the three .onnx models to this directory")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal fails")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import onnx
    import onnxruntime

    from pipeline.errors import DeployError

    try:
        models, sites = build_models(args.frozen, args.rewritten, args.opset)
    except DeployError as e:
        sys.exit("rewrite_speed: " + e.message)
    for name, model in models.items():
        onnx.checker.check_model(model)
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            onnx.save(model, str(Path(args.save) / (name + ".onnx")))
    sess = sessions(models, args.threads, args.ort_optimizations)
    shapes = {name: describe(model) for name, model in models.items()}
    results, goals, diffs = [], [], {}
    for batch in (int(b) for b in args.batches.split(",") if b):
        data = make_input(sess["tf2onnx"], batch, seed=batch)
        diffs[batch] = agree(sess, data)
        if max(diffs[batch].values()) > 1e-4:
            sys.exit("the models disagree at batch {}: max |diff| {}".format(batch, diffs[batch]))
        times = time_batch(sess, data, args.rounds, args.iterations, args.warmup)
        med = {name: statistics.median(t) for name, t in times.items()}
        for name in MODELS:
            results.append({"batch": batch, "model": name, "median_ms": round(1e3 * med[name], 4),
                            "p90_ms": round(1e3 * p90(times[name]), 4), "runs": len(times[name])})
        for other in ("tf2onnx", "onnxslim"):
            ratio = med["rewritten"] / med[other]
            goals.append({"batch": batch, "goal": "rewritten <= " + other, "ratio": round(ratio, 4),
                          "ok": ratio <= 1 + args.tolerance})

    print("ONNX Runtime {} CPU, {} intra-op threads, {} graph optimizations, opset {}; {} rounds x {} runs per "
          "model per batch".format(onnxruntime.__version__, args.threads or "default", args.ort_optimizations,
                                   args.opset, args.rounds, args.iterations))
    for name in MODELS:
        ops = ", ".join("{} {}".format(k, v) for k, v in shapes[name]["ops"].items())
        print("  {:<9} {:>4} nodes {:>9} bytes  {}".format(name, shapes[name]["nodes"], shapes[name]["bytes"], ops))
    if sites is not None:
        print("  rewritten = tf2onnx + " + ", ".join("{} ({} sites)".format(k, len(v)) for k, v in sites.items()))
    print("{:>5}  {:<9} {:>11} {:>11}".format("batch", "model", "median ms", "p90 ms"))
    for r in results:
        print("{:>5}  {:<9} {:>11.3f} {:>11.3f}".format(r["batch"], r["model"], r["median_ms"], r["p90_ms"]))
    for g in goals:
        verdict = "ok" if g["ok"] else "FAIL"
        print("batch {:>2}: {:<22} ratio {:.3f}  {}".format(g["batch"], g["goal"], g["ratio"], verdict))
    print(json.dumps({"benchmark": "rewrite_speed", "frozen": str(args.frozen), "rewritten": args.rewritten or
                      "+".join(SHIPPED_PASSES) + " then tf2onnx", "opset": args.opset,
                      "onnxruntime": onnxruntime.__version__, "threads": args.threads,
                      "ort_optimizations": args.ort_optimizations, "rounds": args.rounds,
                      "iterations": args.iterations, "tolerance": args.tolerance, "models": shapes,
                      "max_abs_diff_vs_tf2onnx": {str(b): d for b, d in diffs.items()}, "results": results,
                      "rewrite_sites": {k: len(v) for k, v in sites.items()} if sites else None, "goals": goals, "ok": all(g["ok"] for g in goals)}, sort_keys=True))
    if args.check and not all(g["ok"] for g in goals):
        sys.exit(1)


if __name__ == "__main__":
    main()
