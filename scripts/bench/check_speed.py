#!/usr/bin/env python3
"""Cold `deploy check` and `deploy diff` wall times against a bare `import tensorflow` (issue 20
goals: a 200,000-node graph checked within 0.75x `import tensorflow` timed in the same run;
MobileNetV2 <= 0.5 s without conversion; `deploy diff` of two 200,000-node graphs <= 5 s).

    python scripts/bench/check_speed.py [--nodes 200000] [--rounds 5] [--mobilenet] [--diff] [--convert] [--model frozen.pb]

Every timing is a fresh process, timed end to end (interpreter start, imports, read, check,
report), so it is what a user waits for. The rounds alternate (check, import tensorflow, ...) so
a change in machine load hits both alike; the median of ``--rounds`` is reported, with the
ratio, and `uptime`'s load average before and after (figures from a loaded machine are not
comparable: run it on a quiet one). Each process's CPU time (user + sys, children included:
the diff's second reading process) is reported too, the figure a shared machine disturbs least.

- The 200,000-node graph is generated without TensorFlow, with deploy's own protobuf module
  (frozen-CNN blocks Const -> Conv2D -> Const -> BiasAdd -> Relu, see graph_read.py).
- ``--mobilenet`` builds MobileNetV2 (keras.applications, weights=None, 224x224) frozen with
  convert_variables_to_constants_v2 once into the temporary folder (needs TensorFlow; not timed).
- ``--diff`` times `deploy diff A B` where B is A with every node renamed and the order reversed
  (diff_speed.py's renamed copy): nothing matches by name or position.
- ``--model`` also times a real model of yours (e.g. runs/jetson_tx2/freeze/frozen.pb).
- ``--convert`` also times `deploy check` of MobileNetV2 with tf2onnx run (the real-conversion
  route; the other checks run with DEPLOY_CHECK_CONVERT=0) and reports the time it adds.

One JSON line at the end for tooling.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_read import write_frozen  # noqa: E402

TARGET = "jetson_tx2"


CPU = {}  # series -> CPU seconds (user + sys) of each timed process, the figure a loaded machine disturbs least


def _timed(argv, convert=False, ok=(0, 2), series=None):
    env = dict(os.environ, DEPLOY_CHECK_CONVERT="1" if convert else "0", TF_CPP_MIN_LOG_LEVEL="3")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        sys.exit("{} failed ({}): {}".format(" ".join(argv), proc.returncode, proc.stderr.decode()[-2000:]))
    if series:
        CPU.setdefault(series, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return took, proc.stdout


def check_argv(path):
    return [sys.executable, "-m", "pipeline", "check", str(path), "--target", TARGET, "--format", "json"]


def _load():
    try:
        return os.getloadavg()
    except OSError:
        return None


def _mobilenet(folder):
    code = (
        "import sys, tensorflow as tf, keras\n"
        "from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2\n"
        "m = keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3))\n"
        "f = tf.function(lambda x: m(x, training=False))\n"
        "c = convert_variables_to_constants_v2(f.get_concrete_function(tf.TensorSpec([None, 224, 224, 3], tf.float32, "
        "name='input')))\n"
        "open(sys.argv[1], 'wb').write(c.graph.as_graph_def().SerializeToString())\n")
    path = Path(folder) / "mobilenet_v2.pb"
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, cwd=str(ROOT),
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mobilenet", action="store_true", help="also MobileNetV2 (needs TensorFlow to build it)")
    parser.add_argument("--diff", action="store_true", help="also deploy diff of two --nodes graphs")
    parser.add_argument("--convert", action="store_true", help="with --mobilenet: also with tf2onnx run")
    parser.add_argument("--model", help="also time `deploy check` of this model")
    args = parser.parse_args()
    load_before = _load()
    series = {"check": [], "import_tensorflow": []}
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "g{}.pb".format(args.nodes)
        write_frozen(big, args.nodes)
        mobilenet = _mobilenet(tmp) if args.mobilenet else None
        renamed = None
        if args.diff:
            from diff_speed import renamed_copy

            renamed = Path(tmp) / "renamed.pb"
            renamed_copy(big, renamed)
            series["diff"] = []
        if mobilenet:
            series["check_mobilenet_v2"] = []
            if args.convert:
                series["check_mobilenet_v2_converted"] = []
        nodes = None
        for _ in range(args.rounds):
            took, out = _timed(check_argv(big), series="check")
            series["check"].append(took)
            nodes = json.loads(out)["model"]["nodes"]
            series["import_tensorflow"].append(_timed([sys.executable, "-c", "import tensorflow"], ok=(0,),
                                                      series="import_tensorflow")[0])
            if mobilenet:
                series["check_mobilenet_v2"].append(_timed(check_argv(mobilenet), series="check_mobilenet_v2")[0])
                if args.convert:
                    series["check_mobilenet_v2_converted"].append(_timed(check_argv(mobilenet), convert=True)[0])
            if args.model:
                series.setdefault("check_model", []).append(_timed(check_argv(args.model))[0])
            if renamed:
                series["diff"].append(_timed([sys.executable, "-m", "pipeline", "diff", str(big), str(renamed),
                                              "--format", "json"], ok=(0, 4), series="diff")[0])
    medians = {k: round(statistics.median(v), 3) for k, v in series.items()}
    result = {"benchmark": "check_speed", "rounds": args.rounds, "nodes": nodes, "median_seconds": medians,
              "ratio_check_to_import_tensorflow": round(medians["check"] / medians["import_tensorflow"], 3),
              "load_before": load_before, "load_after": _load(), "python": sys.version.split()[0]}
    cpu = {k: round(statistics.median(v), 3) for k, v in CPU.items()}
    result["median_cpu_seconds"] = cpu
    result["cpu_ratio_check_to_import_tensorflow"] = round(cpu["check"] / cpu["import_tensorflow"], 3)
    if "check_mobilenet_v2_converted" in medians:
        result["conversion_adds_seconds"] = round(medians["check_mobilenet_v2_converted"] - medians["check_mobilenet_v2"], 3)
    print("load average before {} after {}".format(load_before, result["load_after"]))
    for key, value in medians.items():
        print("{:<32} {:7.3f} s (median of {})".format(key, value, args.rounds))
    for key, value in cpu.items():
        print("{:<32} {:7.3f} s CPU (user + sys, median)".format(key, value))
    print("check / import tensorflow: {:.2f} (goal <= 0.75); in CPU time {:.2f}".format(
        result["ratio_check_to_import_tensorflow"], result["cpu_ratio_check_to_import_tensorflow"]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
