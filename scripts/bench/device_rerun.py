#!/usr/bin/env python3
"""An unchanged `deploy run` with `device: ssh` over loopback, everything cached (goal: <= 2 s), and what a
changed config sends.

    python scripts/bench/device_rerun.py [--repeats 5] [--keep DIR] [--json]

Setup (not timed): a real sshd on 127.0.0.1 with generated keys (the tests' SshServer), a generated
dataset, and one full run of configs/jetson_tx2.yaml shrunk as the end-to-end tests shrink it
(32 px, 1 epoch), with `device.transport: ssh` to that sshd; the agent runs on this Python with its
ONNX Runtime backend. Then:

  cached   `deploy run` again, unchanged, --repeats times, each a fresh process: wall time (median,
           min, max). Every stage is a cache hit; the device is still asked once (the engine stage's
           pending check pings the agent over the shared ssh connection).
  changed  `--set stages.benchmark.iterations=7`: benchmark runs again; the lines saying what was sent
           to the board are counted (goal: none — the model and images are on the board already).
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "device"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from devicekit import SshServer
    from pipeline.data.shapes import generate_shapes

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="device-rerun-"))
    root.mkdir(parents=True, exist_ok=True)
    server = SshServer(root / "sshd").start()
    try:
        if not (root / "data").exists():
            generate_shapes(root / "data", image_size=32, train_per_class=6, val_per_class=2)
        sets = ["run.dir={}".format(root / "runs"), "dataset.path={}".format(root / "data"), "model.input_size=32",
                "stages.train.epochs=1", "stages.train.batch_size=8", "stages.convert.compare_samples=4",
                "stages.benchmark.warmup=2", "stages.benchmark.iterations=5", "stages.benchmark.batch_sizes=[1, 4]",
                "device.transport=ssh", "device.host=127.0.0.1", "device.port={}".format(server.port),
                "device.user={}".format(server.user), "device.identity_file={}".format(server.key),
                "device.known_hosts_file={}".format(server.known_hosts), "device.work_dir={}".format(root / "board"),
                "device.python={}".format(sys.executable)]

        def run(*extra):
            argv = [sys.executable, "-m", "pipeline", "run", str(ROOT / "configs" / "jetson_tx2.yaml")]
            for s in sets + list(extra):
                argv += ["--set", s]
            t0 = time.perf_counter()
            res = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
            seconds = time.perf_counter() - t0
            if res.returncode != 0:
                sys.exit("deploy run failed:\n" + res.stderr[-2000:])
            return seconds, res.stderr

        first, _ = run()
        cached = []
        for _ in range(args.repeats):
            seconds, err = run()
            if "running" in err:
                sys.exit("an unchanged re-run ran a stage:\n" + err)
            cached.append(seconds)
        changed_s, err = run("stages.benchmark.iterations=7")
        sent = [line for line in err.splitlines() if "device: sending" in line]
    finally:
        server.stop()
    result = {"first_run_s": first, "cached_median_s": statistics.median(cached), "cached_min_s": min(cached),
              "cached_max_s": max(cached), "repeats": args.repeats, "changed_run_s": changed_s, "changed_sent": sent}
    if args.json:
        print(json.dumps(result))
    else:
        print("first run {:.1f} s; unchanged re-run over ssh: median {:.2f} s (min {:.2f}, max {:.2f}; {} runs); "
              "changed benchmark config: {:.1f} s, files sent: {}".format(
                  first, result["cached_median_s"], result["cached_min_s"], result["cached_max_s"], args.repeats,
                  changed_s, len(sent) or "none"))


if __name__ == "__main__":
    main()
