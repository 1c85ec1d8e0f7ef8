#!/usr/bin/env python3
"""`deploy check` with real conversion against tf2onnx's own CLI on the same frozen graph, in the same run
(issue 26 item 1): wall time and peak RSS of each, the re-check from the answer cache, and a zoo.

    python scripts/bench/check_convert.py [--single MobileNetV2:96 ResNet50:64] [--zoo 12] [--rounds 1]
    python scripts/bench/check_convert.py --worker-peaks DenseNet121:64 MobileNetV3Large:64 [--baseline DIR]

Goals: a single check <= 1.15x `python -m tf2onnx.convert --graphdef` wall time and <= 1.2x its peak RSS;
a re-check of the unchanged file <= 0.5 s; a zoo of N keras.applications models (weights=None, small
input) on this machine's cores <= 0.6x the sum of their single checks, peak RSS <= 2 GB.

- Models are keras.applications with weights=None, frozen with convert_variables_to_constants_v2 into a
  temporary folder (not timed). ``NAME:SIZE`` picks a model and its input size.
- Every timed command is a fresh process. Peak RSS is the peak of the SUM over the process and all its
  descendants (deploy's worker included), sampled every 50 ms from /proc: the memory the machine needs.
- The rounds alternate tf2onnx's CLI and deploy check (``--no-cache -q``) on each model, so load that
  changes during the run hits both; the medians and ratios are printed, with the load average.
- The zoo: ``--zoo N`` models cycled from ZOO_MODELS (distinct files), `deploy check FOLDER --no-cache -q`
  against the sum of each model's single `deploy check` wall time measured in the same run
  (``--zoo-memory-only``: the zoo alone). Its peak is counted as above (the whole tree at one instant); the
  line also gives deploy's own process and each worker at that instant, and each one's own peak.
  ``DEPLOY_CHECK_MAX_MB`` in the environment is the zoo's memory budget (default: deploy's own). On a loaded
  machine set ``DEPLOY_CHECK_CONVERT_TIMEOUT`` (e.g. 900): a conversion that times out is killed, which would
  lower the peak and turn the model's answer into a prediction.

- ``--worker-peaks``: one converter worker (as a zoo starts it: pure-Python protobuf) converts the models in
  order; per model its peak (VmHWM, reset per request), its RSS after, and what it rose above its RSS before, as
  MB and as a multiple of the graph's bytes (the pool's ``expected_peak`` model). ``--baseline DIR``: the same,
  alternating, with the worker of another checkout (e.g. ``git worktree add /tmp/old HEAD~1``), whose ONNX
  outputs are run beside this tree's in ONNX Runtime on one input (tf2onnx's output is not byte-stable).

One JSON line at the end for tooling.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
ZOO_MODELS = ("MobileNetV2:64", "MobileNetV3Small:64", "MobileNetV3Large:64", "EfficientNetB0:64",
              "DenseNet121:64", "NASNetMobile:64", "MobileNet:64", "EfficientNetV2B0:64")
TARGET = "jetson_tx2"
OPSET = 13  # jetson_tx2's: what deploy check converts at


def _tree_rss(root):
    """Sum of VmRSS (bytes) over ``root`` and its descendants."""
    return sum(_tree_rss_by_pid(root).values())


def _tree_rss_by_pid(root):
    """{pid: VmRSS bytes} of ``root`` and its descendants, read at (nearly) one instant."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/{}/stat".format(entry)) as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, todo = {root}, [root]
    while todo:
        pid = todo.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                todo.append(child)
    found = {}
    for pid in tree:
        try:
            with open("/proc/{}/status".format(pid)) as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        found[pid] = int(line.split()[1]) * 1024
        except OSError:
            pass
    return found


def timed(argv, env=None, ok=(0, 2), cpu=None, breakdown=None):
    """(wall seconds, peak tree RSS bytes) of one fresh process; its CPU seconds (user + sys, its waited-for
    descendants included: deploy's worker) appended to ``cpu`` when given: the figure load disturbs least.
    ``breakdown``: a dict given the tree at the peak: {"process": MB, "children": [MB, ...], "at_s": seconds},
    and each process's own peak ("process_peak", "children_peaks": workers in start order)."""
    import resource

    full = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out_file, err_file = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # a pipe would fill and block it
    proc = subprocess.Popen(argv, cwd=str(ROOT), env=full, stdout=out_file, stderr=err_file)
    peak, own = 0, {}
    while proc.poll() is None:
        rss = _tree_rss_by_pid(proc.pid)
        for pid, value in rss.items():
            own[pid] = max(own.get(pid, 0), value)
        if sum(rss.values()) > peak:
            peak = sum(rss.values())
            if breakdown is not None:
                breakdown.update(process=rss.get(proc.pid, 0) >> 20, at_s=round(time.perf_counter() - start, 1),
                                 children=[rss[p] >> 20 for p in sorted(rss) if p != proc.pid])
        time.sleep(0.05)
    wall = time.perf_counter() - start
    proc.wait()
    if breakdown is not None:
        breakdown.update(process_peak=own.get(proc.pid, 0) >> 20,
                         children_peaks=[own[p] >> 20 for p in sorted(own) if p != proc.pid])
    err_file.seek(0)
    err = err_file.read()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if proc.returncode not in ok:
        sys.exit("{} failed ({}): {}".format(" ".join(map(str, argv)), proc.returncode, err.decode()[-2000:]))
    return wall, peak


def build(spec, folder):
    """keras.applications NAME at SIZE x SIZE, weights=None, frozen to folder/NAME_SIZE.pb (not timed)."""
    name, size = spec.split(":")
    path = Path(folder) / "{}_{}.pb".format(name, size)
    if path.exists():
        return path
    code = ("import os, sys\n"
            "import tensorflow as tf\n"
            "from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2\n"
            "m = getattr(tf.keras.applications, {name!r})(weights=None, input_shape=({size}, {size}, 3))\n"
            "f = tf.function(lambda x: m(x, training=False)).get_concrete_function(\n"
            "    tf.TensorSpec((1, {size}, {size}, 3), tf.float32, name='input'))\n"
            "g = convert_variables_to_constants_v2(f)\n"
            "assert [t.name for t in g.outputs] == ['Identity:0'], g.outputs\n"
            "open({path!r}, 'wb').write(g.graph.as_graph_def().SerializeToString())\n").format(
                name=name, size=int(size), path=str(path))
    subprocess.run([PY, "-c", code], check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


WORKER_PEAKS = """
import json, os, sys
from pipeline.check.worker import Worker
folder, out, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
worker = Worker(folder, big=True)
try:
    worker.ask({"do": "convert", "path": os.path.join(folder, "missing.pb"), "opset": 13, "out": out}, 600)
    for path in paths:
        before = worker.rss
        answer = worker.ask({"do": "convert", "path": path, "opset": 13,
                             "out": os.path.join(out, os.path.basename(path) + ".onnx")}, 1800)
        print(json.dumps({"path": path, "status": answer["status"], "before": before, "peak": worker.peak_rss,
                          "after": worker.rss, "seconds": answer.get("seconds")}), flush=True)
finally:
    worker.close()
"""


def worker_peaks(paths, tree, out):
    """[{path, status, before, peak, after, seconds}] of one worker of checkout ``tree`` converting ``paths``."""
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([PY, "-c", WORKER_PEAKS, out, out] + [str(p) for p in paths], cwd=str(tree), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]


def ort_difference(a, b):
    """Largest absolute difference between two ONNX models' outputs on one seeded random input (ONNX Runtime)."""
    import numpy as np
    import onnxruntime

    sessions = [onnxruntime.InferenceSession(p, providers=["CPUExecutionProvider"]) for p in (a, b)]
    feed = {i.name: np.random.RandomState(0).standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
            .astype(np.float32) for i in sessions[0].get_inputs()}
    return max(float(np.max(np.abs(x - y))) for x, y in zip(*(s.run(None, feed) for s in sessions)))


def peaks_rows(specs, folder, baseline, rounds):
    """Per model and tree: the worker's peak, RSS after and rise above its RSS before (MB, and x the graph's bytes)."""
    paths = [build(spec, folder) for spec in specs]
    trees = [("this", ROOT)] + ([("baseline", Path(baseline).resolve())] if baseline else [])
    rows = {}
    for r in range(rounds):
        for name, tree in (trees if r % 2 == 0 else trees[::-1]):
            for spec, path, got in zip(specs, paths, worker_peaks(paths, tree, os.path.join(folder, name))):
                rise = got["peak"] - got["before"]
                row = {"tree": name, "round": r + 1, "model": spec, "graph_mb": round(path.stat().st_size / 2 ** 20, 1),
                       "status": got["status"], "peak_mb": got["peak"] >> 20, "before_mb": got["before"] >> 20,
                       "after_mb": got["after"] >> 20, "rise_mb": rise >> 20,
                       "factor": round(rise / path.stat().st_size, 1), "seconds": got["seconds"]}
                rows.setdefault(spec, []).append(row)
                print("{tree:8} round {round} {model:20} {graph_mb:5} MB graph: peak {peak_mb} MB, {rise_mb} MB above "
                      "{before_mb} MB ({factor}x the graph), {after_mb} MB after, {seconds} s".format(**row), flush=True)
    if baseline:
        for spec, path in zip(specs, paths):
            onnx_name = path.name + ".onnx"
            diff = ort_difference(os.path.join(folder, "this", onnx_name), os.path.join(folder, "baseline", onnx_name))
            print("{}: ONNX Runtime outputs of the two trees' models differ by at most {:.2g}".format(spec, diff))
            rows[spec].append({"ort_max_abs_difference": diff})
    return rows


def load():
    return os.getloadavg()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", nargs="*", default=["MobileNetV2:96"], help="NAME:SIZE models for the single check")
    parser.add_argument("--zoo", type=int, default=0, help="zoo size (0: no zoo); the issue's figure is 12")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--zoo-memory-only", action="store_true",
                        help="the zoo alone: its wall time and peak RSS, without the single checks (no ratio)")
    parser.add_argument("--keep", help="build the models into this folder and keep them")
    parser.add_argument("--worker-peaks", nargs="+", metavar="NAME:SIZE",
                        help="per-model peaks of one converter worker (no single check, no zoo)")
    parser.add_argument("--baseline", help="with --worker-peaks: another checkout's worker, alternating")
    args = parser.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="bench-check-convert-")
    os.makedirs(folder, exist_ok=True)
    if args.worker_peaks:
        before = round(load(), 2)
        rows = peaks_rows(args.worker_peaks, folder, args.baseline, args.rounds)
        print("load average {} -> {}".format(before, round(load(), 2)))
        print(json.dumps({"worker_peaks": rows, "load_before": before, "load_after": round(load(), 2)}, sort_keys=True))
        return
    cache = tempfile.mkdtemp(prefix="bench-check-cache-")
    result = {"load_before": round(load(), 2), "cpus": len(os.sched_getaffinity(0)), "single": {}}
    deploy = [PY, "-m", "pipeline", "check"]
    for spec in args.single:
        path = build(spec, folder)
        cli, mine, cli_cpu, mine_cpu = [], [], [], []
        for _ in range(args.rounds):
            cli.append(timed([PY, "-m", "tf2onnx.convert", "--graphdef", str(path), "--inputs", "input:0",
                              "--outputs", "Identity:0", "--opset", str(OPSET), "--output", str(path) + ".onnx"],
                             cpu=cli_cpu))
            mine.append(timed(deploy + [str(path), "--target", TARGET, "--no-cache", "-q"], cpu=mine_cpu))
        first = timed(deploy + [str(path), "--target", TARGET, "-q"], env={"DEPLOY_CHECK_CACHE_DIR": cache})
        hits = [timed(deploy + [str(path), "--target", TARGET, "-q"], env={"DEPLOY_CHECK_CACHE_DIR": cache})
                for _ in range(3)]
        row = {"bytes": path.stat().st_size,
               "tf2onnx_cli_s": statistics.median(w for w, _ in cli), "deploy_check_s": statistics.median(w for w, _ in mine),
               "tf2onnx_cli_rss_mb": max(r for _, r in cli) >> 20, "deploy_check_rss_mb": max(r for _, r in mine) >> 20,
               "tf2onnx_cli_cpu_s": round(statistics.median(cli_cpu), 1),
               "deploy_check_cpu_s": round(statistics.median(mine_cpu), 1),
               "cache_store_s": round(first[0], 2), "cache_hit_s": round(statistics.median(w for w, _ in hits), 3)}
        row["wall_ratio"] = round(row["deploy_check_s"] / row["tf2onnx_cli_s"], 3)
        row["rss_ratio"] = round(row["deploy_check_rss_mb"] / max(1, row["tf2onnx_cli_rss_mb"]), 3)
        result["single"][spec] = row
        print("{}: tf2onnx CLI {:.1f} s ({:.1f} s CPU) {} MB | deploy check {:.1f} s ({:.1f} s CPU) {} MB | wall "
              "{:.2f}x, RSS {:.2f}x | cache hit {:.2f} s".format(
                  spec, row["tf2onnx_cli_s"], row["tf2onnx_cli_cpu_s"], row["tf2onnx_cli_rss_mb"], row["deploy_check_s"],
                  row["deploy_check_cpu_s"], row["deploy_check_rss_mb"], row["wall_ratio"], row["rss_ratio"],
                  row["cache_hit_s"]), flush=True)
    if args.zoo:
        zoo = Path(folder) / "zoo"
        zoo.mkdir(exist_ok=True)
        specs = [ZOO_MODELS[i % len(ZOO_MODELS)] for i in range(args.zoo)]
        singles = []
        for i, spec in enumerate(specs):
            path = zoo / "{:02d}_{}".format(i, build(spec, folder).name)
            if not path.exists():  # a copy: distinct files, so the zoo converts each
                path.write_bytes(build(spec, folder).read_bytes())
            if not args.zoo_memory_only:
                singles.append(timed(deploy + [str(path), "--target", TARGET, "--no-cache", "-q"]))
        at_peak = {}
        together = timed(deploy + [str(zoo), "--target", TARGET, "--no-cache", "-q"], breakdown=at_peak)
        result["zoo"] = {"models": len(specs), "zoo_s": round(together[0], 1), "zoo_rss_mb": together[1] >> 20,
                         "sum_single_s": round(sum(w for w, _ in singles), 1),
                         "max_single_rss_mb": max((r for _, r in singles), default=0) >> 20, "at_peak": at_peak,
                         "max_mb_env": os.environ.get("DEPLOY_CHECK_MAX_MB", ""),
                         "convert_timeout_env": os.environ.get("DEPLOY_CHECK_CONVERT_TIMEOUT", "")}
        result["zoo"]["ratio"] = round(together[0] / result["zoo"]["sum_single_s"], 3) if singles else None
        print("zoo of {}: {:.1f} s, peak {} MB (deploy {} MB + workers {} MB at that instant; each worker's own "
              "peak {} MB) | sum of single checks {:.1f} s | {:.2f}x".format(
                  len(specs), together[0], together[1] >> 20, at_peak.get("process"), at_peak.get("children"),
                  at_peak.get("children_peaks"), result["zoo"]["sum_single_s"], result["zoo"]["ratio"] or 0))
    result["load_after"] = round(load(), 2)
    print("load average {} -> {} on {} CPUs".format(result["load_before"], result["load_after"], result["cpus"]))
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
