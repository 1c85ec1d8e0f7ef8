#!/usr/bin/env python3
"""Wall time of deploy's stages after train vs an engineer's one-process script (goal: ratio <= 1.0).

    python scripts/bench/run_vs_script.py [--config configs/jetson_tx2.yaml] [--repeats 3]
        [--epochs 1] [--train-per-class 20] [--val-per-class 5] [--input-size N] [--keep DIR] [--json]

What it measures, on the same trained model:

  setup   (not timed) in a temporary directory, `deploy run CONFIG --until train`: generates the
          dataset and trains the config's model (by default the config's own model and input
          size, a small dataset and 1 epoch: export/convert cost depends on the network, not on
          how well it is trained).
  deploy  `deploy run CONFIG --from export --force --json` in a fresh process: export, freeze,
          check, rewrite, convert, (engine: pending) and benchmark, all forced to run again;
          train is cached. Per-stage seconds are the runner's own (its JSON events, which are
          the manifests' duration_s); "outside stages" = process wall time minus their sum
          (interpreter start, config and target loading, dataset fingerprint, lock, hashing).
  script  this file run again as a fresh process (`--engineer-script`), doing the same real work
          in one process from the same model.keras: load it (safe mode, like deploy), export the
          inference graph as deploy's export stage does (tf.function with a named dynamic-batch
          input, training=False, tf.saved_model.save, fingerprint UUID cleared), freeze (load the
          SavedModel, convert_variables_to_constants_v2 on its serving signature), tf2onnx at the
          opset deploy's convert stage chose, and an ONNX Runtime loop with the benchmark stage's
          batch sizes, warm-up and iterations. No checks, no rewrite, no comparison.

The two alternate (deploy, script, deploy, script, ...) `--repeats` times (default 3) so both see
the same machine; reported are medians (min, max), the ratio of the medians deploy/script and the
script's own phase times. Export byte-identity is checked on the way: every deploy export must
have the same sha256 (and the script's export, made as the first work of its process, is
compared with it too). `--json` prints one JSON object at the end instead of the plain line.
Run one at a time: on the 2-core machine everything here is CPU-bound.
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("export", "freeze", "check", "rewrite", "convert", "engine", "benchmark")


# ---------------------------------------------------------------------------------------- helpers


def sha256_tree(path):
    """sha256 of a file, or of a directory tree (relative paths and file hashes, sorted) — the
    same digest deploy's manifests record (pipeline.files.sha256_path)."""
    path = Path(path)

    def file_hash(p):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    if path.is_file():
        return file_hash(path)
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(file.relative_to(path).as_posix().encode())
        h.update(b"\0")
        h.update(file_hash(file).encode())
        h.update(b"\n")
    return h.hexdigest()


def _timed(cmd, env=None):
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit("{} exited with {}".format(" ".join(cmd[:6]), proc.returncode))
    return seconds, proc.stdout


def _events(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _fmt(values):
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


# ------------------------------------------------------------------------------- engineer script


def engineer_script(args):
    """The one-process script: load, export, freeze, tf2onnx, ONNX Runtime loop. Prints JSON phases."""
    t0 = time.perf_counter()
    phases = {}

    def mark(name, since):
        now = time.perf_counter()
        phases[name] = round(now - since, 3)
        return now

    # the environment deploy's import_tf() sets (same kernels, same numbers)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import keras
    import tensorflow as tf

    t = mark("import_tf", t0)
    model = keras.models.load_model(args.keras, compile=False, safe_mode=True)
    t = mark("load_keras", t)

    out = Path(args.out)
    saved = out / "saved_model"
    shape = [None] + list(model.inputs[0].shape[1:])
    spec = tf.TensorSpec(shape, model.inputs[0].dtype, name="input")

    @tf.function(input_signature=[spec])
    def serve(x):
        return {"probabilities": model(x, training=False)}

    module = tf.Module()
    module.model = model
    module.serve = serve
    tf.saved_model.save(module, str(saved), signatures={"serving_default": serve})
    fp_path = saved / "fingerprint.pb"
    if fp_path.exists():  # as deploy does: drop the per-save UUID
        from tensorflow.core.protobuf import fingerprint_pb2

        fp = fingerprint_pb2.FingerprintDef()
        fp.ParseFromString(fp_path.read_bytes())
        if any(f.name == "uuid" for f in fp.DESCRIPTOR.fields):
            fp.ClearField("uuid")
        fp_path.write_bytes(fp.SerializeToString(deterministic=True))
    t = mark("export", t)

    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    if args.freeze_from == "saved_model":
        loaded = tf.saved_model.load(str(saved))  # kept referenced: its variables must outlive the freeze
        func = loaded.signatures["serving_default"]
    else:
        func = serve.get_concrete_function()
    frozen = convert_variables_to_constants_v2(func)
    graph_def = frozen.graph.as_graph_def()
    (out / "frozen.pb").write_bytes(graph_def.SerializeToString(deterministic=True))
    inputs = [t_.name for t_ in frozen.inputs if t_.dtype != tf.resource]
    outputs = [t_.name for t_ in frozen.outputs]
    t = mark("freeze", t)

    import logging

    import onnx
    import tf2onnx

    tf2onnx.logging.set_level(logging.ERROR)
    t = mark("import_tf2onnx", t)
    onnx_model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs,
                                                   opset=args.opset)
    onnx.save(onnx_model, str(out / "model.onnx"))
    t = mark("tf2onnx", t)

    import numpy as np
    import onnxruntime as ort

    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    out_names = [o.name for o in sess.get_outputs()]
    dims = [d if isinstance(d, int) else None for d in sess.get_inputs()[0].shape[1:]]
    rng = np.random.default_rng(0)
    p50 = {}
    for bs in args.batch_sizes:
        feed = {name: rng.uniform(0, 255, size=[bs] + dims).astype(np.float32)}
        for _ in range(args.warmup):
            sess.run(out_names, feed)
        times = []
        for _ in range(args.iterations):
            s = time.perf_counter()
            sess.run(out_names, feed)
            times.append(time.perf_counter() - s)
        p50[str(bs)] = round(statistics.median(times) * 1000, 3)
    t = mark("onnxruntime", t)
    print(json.dumps({"phases": phases, "total_in_process": round(t - t0, 3), "p50_ms": p50,
                      "onnx_nodes": len(onnx_model.graph.node), "frozen_nodes": len(graph_def.node),
                      "export_sha256": sha256_tree(saved)}))
    return 0


# ------------------------------------------------------------------------------------- the bench


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/jetson_tx2.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1, help="training epochs of the (untimed) setup run")
    parser.add_argument("--train-per-class", type=int, default=20)
    parser.add_argument("--val-per-class", type=int, default=5)
    parser.add_argument("--input-size", type=int, help="override model.input_size (default: the config's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="more config overrides, passed to every deploy run")
    parser.add_argument("--freeze-from", choices=("saved_model", "memory"), default="saved_model",
                        help="script: freeze the reloaded SavedModel (as deploy) or the traced function in memory")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (kept) instead of a temporary directory; "
                        "a trained model already there is reused")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the last plain line")
    # the child: the engineer's script
    parser.add_argument("--engineer-script", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keras", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--opset", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--iterations", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engineer_script:
        return engineer_script(args)

    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        return bench(args, Path(args.keep).resolve())
    with tempfile.TemporaryDirectory(prefix="run_vs_script-") as tmp:
        return bench(args, Path(tmp))


def bench(args, work):
    sets = ["run.dir={}".format(work / "runs"), "dataset.path={}".format(work / "data"),
            f"stages.train.epochs={args.epochs}", f"dataset.train_per_class={args.train_per_class}",
            f"dataset.val_per_class={args.val_per_class}"]
    if args.input_size:
        sets.append(f"model.input_size={args.input_size}")
    sets += args.set
    base = [sys.executable, "-m", "pipeline", "run", args.config]
    for s in sets:
        base += ["--set", s]

    # setup: dataset + train (cached if --keep holds it already), not timed
    seconds, out = _timed(base + ["--until", "train", "--json"])
    summary = _events(out)[-1]
    run_dir = Path(summary["run_dir"])
    train = next(s for s in summary["stages"] if s["name"] == "train")
    print("setup: train {} in {:.1f} s ({})".format(train["status"], seconds, run_dir), file=sys.stderr)

    sys.path.insert(0, str(ROOT))
    from pipeline.config import load_config

    config = load_config(str(ROOT / args.config) if not Path(args.config).is_absolute() else args.config, sets)
    bopts = config.stages.benchmark
    deploy_cmd = base + ["--from", "export", "--force", "--json"]

    deploy_walls, script_walls, per_stage, script_phases, script_inproc = [], [], {}, {}, []
    export_shas, script_sha, opset = set(), None, None
    for i in range(args.repeats):
        wall, out = _timed(deploy_cmd)
        summary = _events(out)[-1]
        if summary.get("exit_code") != 0:
            raise SystemExit(f"deploy run failed: {summary}")
        deploy_walls.append(wall)
        stage_sum = 0.0
        for s in summary["stages"]:
            if s["name"] in STAGES and s["status"] == "ran":
                per_stage.setdefault(s["name"], []).append(s["seconds"])
                stage_sum += s["seconds"]
        per_stage.setdefault("(outside stages)", []).append(wall - stage_sum)
        manifest = json.loads((run_dir / "convert" / "manifest.json").read_text())
        opset = manifest["results"]["opset"]
        export_shas.add(json.loads((run_dir / "export" / "manifest.json").read_text())["outputs"]["saved_model"]["sha256"])

        script_out = Path(tempfile.mkdtemp(prefix="engineer-", dir=str(work)))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--engineer-script", "--keras",
               str(run_dir / "train" / "model.keras"), "--out", str(script_out), "--opset", str(opset),
               "--batch-sizes", ",".join(str(b) for b in bopts.batch_sizes), "--warmup", str(bopts.warmup),
               "--iterations", str(bopts.iterations), "--freeze-from", args.freeze_from]
        wall, out = _timed(cmd)
        result = json.loads(out.strip().splitlines()[-1])
        script_walls.append(wall)
        script_inproc.append(result["total_in_process"])
        for k, v in result["phases"].items():
            script_phases.setdefault(k, []).append(v)
        script_phases.setdefault("(interpreter start/exit)", []).append(wall - result["total_in_process"])
        script_sha = result["export_sha256"]
        shutil.rmtree(script_out, ignore_errors=True)
        print(f"round {i + 1}/{args.repeats}: deploy {deploy_walls[-1]:.2f} s, script {wall:.2f} s",
              file=sys.stderr)

    d, s = statistics.median(deploy_walls), statistics.median(script_walls)
    ratio = d / s
    rows = [("deploy run --from export --force (wall)", _fmt(deploy_walls))]
    rows += [("  " + name, _fmt(per_stage[name])) for name in list(STAGES) + ["(outside stages)"] if name in per_stage]
    rows += [("engineer script (wall)", _fmt(script_walls))]
    rows += [("  " + name, _fmt(v)) for name, v in script_phases.items()]
    width = max(len(r[0]) for r in rows)
    print("{}  {}".format("what".ljust(width), "median s (min-max)"))
    print("{}  {}".format("-" * width, "-" * 18))
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    identical = len(export_shas) == 1
    print(f"\nratio deploy/script: {ratio:.2f} (goal <= 1.00; {args.repeats} rounds, opset {opset}, benchmark {list(bopts.batch_sizes)} x {bopts.iterations} it after {bopts.warmup} warm-up)")
    print("deploy exports byte-identical across rounds: {}; script's export {} deploy's".format(
        "yes" if identical else f"NO ({len(export_shas)} digests)",
        "equals" if identical and script_sha in export_shas else "differs from"))
    result = {"benchmark": "run_vs_script", "config": args.config, "repeats": args.repeats, "opset": opset,
              "deploy_s": {"median": round(d, 3), "min": round(min(deploy_walls), 3), "max": round(max(deploy_walls), 3)},
              "script_s": {"median": round(s, 3), "min": round(min(script_walls), 3), "max": round(max(script_walls), 3)},
              "ratio": round(ratio, 3),
              "deploy_stages_s": {k: round(statistics.median(v), 3) for k, v in per_stage.items()},
              "script_phases_s": {k: round(statistics.median(v), 3) for k, v in script_phases.items()},
              "exports_identical": identical, "script_export_equals_deploy": bool(identical and script_sha in export_shas)}
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
