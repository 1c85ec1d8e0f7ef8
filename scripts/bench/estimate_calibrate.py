#!/usr/bin/env python3
"""Calibrate `deploy estimate` on published TensorRT latencies, and check it on figures kept aside.

    python scripts/bench/estimate_calibrate.py tables     # build the models (TensorFlow), store their layer tables
    python scripts/bench/estimate_calibrate.py fit        # fit, leave-one-model-out, the independent check

``tables`` builds each model the way the field builds it (Keras applications with ``weights=None``,
frozen with convert_variables_to_constants_v2; ResNet-18/34, AlexNet, SqueezeNet and VGG-11/13 as small
Keras code after torchvision's definitions), strips the weights' values (their shapes stay) and reads the
frozen graph with deploy's own reader into engine layers (pipeline.estimate.layers), stored in
``targets/estimate/layer_tables.json`` so the fit and the tests need no TensorFlow.

``fit`` fits the parameters to the CALIBRATION figures per GPU architecture (GROUPS: every board of an
architecture gets its fit; ``default`` over all of them for a board in no group), derives the range's width from
the leave-one-model-out errors and the errors on FOREIGN_POINTS (published figures of other setups, never fitted),
writes ``targets/estimate/calibration.json``, and prints the leave-one-model-out table, the other setups' table
and the independent check
against torch2trt's tables (CHECK: never fitted; torch2trt's per-call time derived from the models it
shares with NetsPresso) as markdown for docs/estimate.md.
"""

import json
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
TABLES = ROOT / "targets" / "estimate" / "layer_tables.json"
CALIBRATION = ROOT / "targets" / "estimate" / "calibration.json"

# Published TensorRT latencies used to FIT: (model, board, precision, batch, ms, source)
TF_TRT_MODELS = ("NVIDIA-AI-IOT/tf_trt_models README.md (TF-TRT FP16, batch 1, TX2 MAX-N + jetson_clocks, "
                 "JetPack 3.2 / TensorRT 3-4, TF-Slim checkpoints)")
# TensorRT 3/4 (2018): not fitted since TensorRT 8's figures exist for the same boards (its depthwise convolutions
# and TF-TRT's per-call overhead are of another era); printed beside the estimate by ``fit``.
TF_TRT_POINTS = [
    ("resnet50", "jetson_tx2", "fp16", 1, 12.5, TF_TRT_MODELS),
    ("resnet101", "jetson_tx2", "fp16", 1, 20.6, TF_TRT_MODELS),
    ("resnet152", "jetson_tx2", "fp16", 1, 28.9, TF_TRT_MODELS),
    ("resnet50v2_299", "jetson_tx2", "fp16", 1, 26.5, TF_TRT_MODELS),
    ("resnet101v2_299", "jetson_tx2", "fp16", 1, 46.9, TF_TRT_MODELS),
    ("resnet152v2_299", "jetson_tx2", "fp16", 1, 69.0, TF_TRT_MODELS),
    ("inception_v3", "jetson_tx2", "fp16", 1, 20.7, TF_TRT_MODELS),
    ("mobilenet_v1_1.0_224", "jetson_tx2", "fp16", 1, 11.1, TF_TRT_MODELS),
    ("mobilenet_v1_0.5_160", "jetson_tx2", "fp16", 1, 4.47, TF_TRT_MODELS),
    ("mobilenet_v1_0.25_128", "jetson_tx2", "fp16", 1, 3.72, TF_TRT_MODELS),
]
CALIBRATION_POINTS = []
# Nota-NetsPresso/netspresso-trainer docs/benchmarks/device_matrix/tensorrt.md (commit 5c321318baa4): TensorRT
# fp16 engines from ONNX (opset 13), 224x224, 3 classes, "the model's computation" only (no pre/post-processing),
# batch 1 (one image per latency; not stated otherwise), power mode not stated. JetPack 4.6 (TensorRT 8.2) on the
# Nano, Xavier NX ("Jetson NX"), TX2 and AGX Xavier ("Jetson Xavier"); JetPack 5.0.1 (TensorRT 8.4) on the AGX Orin.
NETSPRESSO = ("Nota-NetsPresso/netspresso-trainer docs/benchmarks/device_matrix/tensorrt.md (TensorRT fp16 from ONNX, "
              "batch 1, model computation only, JetPack 4.6 / 5.0.1 (AGX Orin), power mode not stated)")
_NP = ("resnet18_c3", "resnet34_c3", "resnet50_c3", "mobilenet_v3_small_c3", "mobilenet_v3_large_c3")
NETSPRESSO_MS = {
    "jetson_nano": (10.8578, 19.5193, 29.2816, 5.0241, 11.278),
    "jetson_tx2": (4.18611, 7.52092, 11.0185, 3.64664, 4.96121),
    "xavier_nx": (1.78444, 3.28956, 4.16903, 1.24565, 1.96175),
    "agx_xavier": (1.10724, 1.99773, 2.83026, 1.00566, 1.50451),
    "agx_orin": (0.520046, 0.87017, 1.1421, 0.721624, 0.919789),
}
# The same table's Orin Nano (JetPack 6.0) predates the MAXN_SUPER mode (JetPack 6.2) the target assumes: not
# fitted, shown beside the estimate in docs/estimate.md.
NETSPRESSO_ORIN_NANO_JP60 = dict(zip(_NP, (1.99792, 3.48368, 4.80201, 1.56278, 2.51209)))
NETSPRESSO_JP60 = NETSPRESSO.replace("JetPack 4.6 / 5.0.1 (AGX Orin)", "JetPack 6.0 (Orin Nano)")
CALIBRATION_POINTS += [(m, b, "fp16", 1, ms, NETSPRESSO) for b, row in NETSPRESSO_MS.items() for m, ms in zip(_NP, row)]
# Figures from a framework's session run (TF-TRT) hold a per-call overhead the fit finds; engine-only ones do not.
WITH_OVERHEAD = {TF_TRT_MODELS}
# Published figures of setups the fit does not use (TensorRT 3/4 through TF-TRT with its session run; JetPack 6.0
# before MAXN_SUPER): never fitted, but each is a published figure for a common classifier on a Jetson from another
# setup, so their errors against the fit (without their model family) are part of the range's width (fit.foreign_rows).
FOREIGN_POINTS = TF_TRT_POINTS + [(m, "orin_nano", "fp16", 1, ms, NETSPRESSO_JP60)
                                  for m, ms in NETSPRESSO_ORIN_NANO_JP60.items()]
# Boards of one GPU architecture share their efficiencies (fractions of each board's own data-sheet peaks).
GROUPS = {"Maxwell/Pascal (no tensor cores)": ("jetson_nano", "jetson_tx2"),
          "Volta": ("agx_xavier", "xavier_nx"),
          "Ampere": ("agx_orin", "orin_nano", "orin_nx")}

# Kept ASIDE: torch2trt docs/benchmarks (fp16, batch 1, latency ms, TensorRT column). Never fitted.
T2T_NANO = "NVIDIA-AI-IOT/torch2trt docs/benchmarks/jetson_nano.md (fp16_mode, batch 1, Latency (TensorRT) ms)"
T2T_XAVIER = "NVIDIA-AI-IOT/torch2trt docs/benchmarks/jetson_xavier.md (fp16_mode, batch 1, Latency (TensorRT) ms)"
CHECK_POINTS = [(m, "jetson_nano", "fp16", 1, ms, T2T_NANO) for m, ms in [
    ("alexnet", 14.7), ("squeezenet1_0", 7.6), ("squeezenet1_1", 4.34), ("resnet18", 11.4), ("resnet34", 20.2),
    ("resnet50", 29.8), ("resnet101", 51.1), ("resnet152", 72.3), ("densenet121", 24.8), ("densenet169", 31.2),
    ("densenet201", 40.8), ("vgg11", 55.1), ("vgg13", 68.7), ("vgg16", 85.1)]] + \
    [(m, "agx_xavier", "fp16", 1, ms, T2T_XAVIER) for m, ms in [
        ("alexnet", 2.02), ("squeezenet1_0", 1.49), ("squeezenet1_1", 1.02), ("resnet18", 1.64), ("resnet34", 2.79),
        ("resnet50", 3.37), ("resnet101", 6.04), ("resnet152", 8.57), ("densenet121", 13.0), ("densenet169", 23.7),
        ("densenet201", 33.0), ("vgg11", 5.24), ("vgg13", 6.34), ("vgg16", 7.46), ("vgg19", 8.61),
        ("mobilenet_v2", 1.67)]]


# ------------------------------------------------------------------------------------------------ models


def _keras_models():
    import tensorflow as tf

    k = tf.keras
    apps = k.applications
    L = k.layers

    def resnet_basic(blocks, classes=1000):
        x = inp = k.Input((224, 224, 3))
        x = L.ZeroPadding2D(3)(x)
        x = L.Conv2D(64, 7, 2, use_bias=False)(x)
        x = L.ReLU()(L.BatchNormalization()(x))
        x = L.MaxPool2D(3, 2, padding="same")(x)
        for stage, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
            for i in range(n):
                stride = 2 if stage > 0 and i == 0 else 1
                y = L.Conv2D(width, 3, stride, padding="same", use_bias=False)(x)
                y = L.ReLU()(L.BatchNormalization()(y))
                y = L.BatchNormalization()(L.Conv2D(width, 3, padding="same", use_bias=False)(y))
                if stride != 1 or x.shape[-1] != width:
                    x = L.BatchNormalization()(L.Conv2D(width, 1, stride, use_bias=False)(x))
                x = L.ReLU()(L.Add()([x, y]))
        x = L.Dense(classes)(L.GlobalAveragePooling2D()(x))
        return k.Model(inp, x)

    def vgg(cfg):
        x = inp = k.Input((224, 224, 3))
        for c in cfg:
            x = L.MaxPool2D(2)(x) if c == "M" else L.Conv2D(c, 3, padding="same", activation="relu")(x)
        x = L.Flatten()(x)
        x = L.Dense(4096, activation="relu")(x)
        x = L.Dense(4096, activation="relu")(x)
        return k.Model(inp, L.Dense(1000)(x))

    def alexnet():
        x = inp = k.Input((224, 224, 3))
        x = L.Conv2D(64, 11, 4, activation="relu")(L.ZeroPadding2D(2)(x))
        x = L.MaxPool2D(3, 2)(x)
        x = L.MaxPool2D(3, 2)(L.Conv2D(192, 5, padding="same", activation="relu")(x))
        for c in (384, 256, 256):
            x = L.Conv2D(c, 3, padding="same", activation="relu")(x)
        x = L.Flatten()(L.MaxPool2D(3, 2)(x))
        x = L.Dense(4096, activation="relu")(x)
        x = L.Dense(4096, activation="relu")(x)
        return k.Model(inp, L.Dense(1000)(x))

    def squeezenet(version):
        def fire(x, s, e):
            x = L.Conv2D(s, 1, activation="relu")(x)
            return L.Concatenate()([L.Conv2D(e, 1, activation="relu")(x),
                                    L.Conv2D(e, 3, padding="same", activation="relu")(x)])

        x = inp = k.Input((224, 224, 3))
        if version == "1_0":
            x = L.MaxPool2D(3, 2)(L.Conv2D(96, 7, 2, activation="relu")(x))
            plan = [(16, 64), (16, 64), (32, 128), "M", (32, 128), (48, 192), (48, 192), (64, 256), "M", (64, 256)]
        else:
            x = L.MaxPool2D(3, 2)(L.Conv2D(64, 3, 2, activation="relu")(x))
            plan = [(16, 64), (16, 64), "M", (32, 128), (32, 128), "M", (48, 192), (48, 192), (64, 256), (64, 256)]
        for step in plan:
            x = L.MaxPool2D(3, 2)(x) if step == "M" else fire(x, *step)
        x = L.Conv2D(1000, 1, activation="relu")(x)
        return k.Model(inp, L.GlobalAveragePooling2D()(x))

    return {
        "resnet18": lambda: resnet_basic((2, 2, 2, 2)),
        "resnet34": lambda: resnet_basic((3, 4, 6, 3)),
        "resnet50": lambda: apps.ResNet50(weights=None),
        "resnet101": lambda: apps.ResNet101(weights=None),
        "resnet152": lambda: apps.ResNet152(weights=None),
        "resnet50v2_299": lambda: apps.ResNet50V2(weights=None, input_shape=(299, 299, 3)),
        "resnet101v2_299": lambda: apps.ResNet101V2(weights=None, input_shape=(299, 299, 3)),
        "resnet152v2_299": lambda: apps.ResNet152V2(weights=None, input_shape=(299, 299, 3)),
        "inception_v3": lambda: apps.InceptionV3(weights=None),
        "mobilenet_v1_1.0_224": lambda: apps.MobileNet(weights=None, alpha=1.0, input_shape=(224, 224, 3)),
        "mobilenet_v1_0.5_160": lambda: apps.MobileNet(weights=None, alpha=0.5, input_shape=(160, 160, 3)),
        "mobilenet_v1_0.25_128": lambda: apps.MobileNet(weights=None, alpha=0.25, input_shape=(128, 128, 3)),
        "mobilenet_v2": lambda: apps.MobileNetV2(weights=None),
        "densenet121": lambda: apps.DenseNet121(weights=None),
        "densenet169": lambda: apps.DenseNet169(weights=None),
        "densenet201": lambda: apps.DenseNet201(weights=None),
        "vgg11": lambda: vgg([64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]),
        "vgg13": lambda: vgg([64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]),
        "vgg16": lambda: apps.VGG16(weights=None),
        "vgg19": lambda: apps.VGG19(weights=None),
        "alexnet": alexnet,
        "squeezenet1_0": lambda: squeezenet("1_0"),
        "squeezenet1_1": lambda: squeezenet("1_1"),
        # NetsPresso's device matrix: 3 classes
        "resnet18_c3": lambda: resnet_basic((2, 2, 2, 2), classes=3),
        "resnet34_c3": lambda: resnet_basic((3, 4, 6, 3), classes=3),
        "resnet50_c3": lambda: apps.ResNet50(weights=None, classes=3),
        "mobilenet_v3_small_c3": lambda: apps.MobileNetV3Small(weights=None, classes=3, input_shape=(224, 224, 3),
                                                               include_preprocessing=False),
        "mobilenet_v3_large_c3": lambda: apps.MobileNetV3Large(weights=None, classes=3, input_shape=(224, 224, 3),
                                                               include_preprocessing=False),
    }


def frozen_without_values(model):
    """The model frozen with convert_variables_to_constants_v2, each big constant's values dropped (shape kept)."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    spec = tf.TensorSpec([None] + list(model.inputs[0].shape[1:]), tf.float32)
    func = tf.function(lambda x: model(x)).get_concrete_function(spec)
    graph_def = convert_variables_to_constants_v2(func).graph.as_graph_def()
    for node in graph_def.node:
        if node.op == "Const":
            tensor = node.attr["value"].tensor
            if len(tensor.tensor_content) > 4096:
                tensor.ClearField("tensor_content")
    return graph_def


def build_tables(names):
    from pipeline.estimate.layers import engine_layers
    from pipeline.graph import read_model

    builders = _keras_models()
    tables = json.loads(TABLES.read_text()) if TABLES.exists() else {}
    for name in names:
        if name in tables:
            continue
        import tensorflow as tf

        tf.keras.backend.clear_session()
        graph_def = frozen_without_values(builders[name]())
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "frozen.pb"
            path.write_bytes(graph_def.SerializeToString())
            layers = engine_layers(read_model(path), None, "fp16")
        tables[name] = [[layer.kind, round(layer.flops), round(layer.weights), round(layer.reads),
                         round(layer.writes), int(layer.known)] for layer in layers]
        print("{}: {} layers, {:.2f} GFLOPs".format(name, len(layers), sum(r[1] for r in tables[name]) / 1e9),
              file=sys.stderr)
        TABLES.parent.mkdir(parents=True, exist_ok=True)
        TABLES.write_text(json.dumps(tables, separators=(",", ":"), sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------------------- fit


def load_layers(name, tables):
    from pipeline.estimate.layers import Layer

    return [Layer(name="{}#{}".format(name, i), kind=r[0], flops=r[1], weights=r[2], reads=r[3], writes=r[4],
                  known=bool(r[5])) for i, r in enumerate(tables[name])]


def points_of(rows, tables):
    from pipeline.estimate.fit import Point

    return [Point(model=m, board=b, precision=p, batch=n, ms=ms, layers=load_layers(m, tables), source=s,
                  overhead=s in WITH_OVERHEAD, family=m[:-3] if m.endswith("_c3") else m)
            for m, b, p, n, ms, s in rows if m in tables]


def facts_of(board):
    from pipeline.targets.device import load_target

    return load_target(board).estimate


def group_fit(points, foreign=()):
    """({board: entry} per GPU architecture group, every leave-one-model-out row (within its group), every foreign
    row: a published figure of another setup (``foreign``) estimated by its group's fit without its model family)."""
    from pipeline.estimate.fit import fit, foreign_rows, leave_one_out, spread_from

    rows, far = [], []
    for members in GROUPS.values():
        mine = [p for p in points if p.board in members]
        rows += leave_one_out(mine, facts_of)
        far += foreign_rows(mine, [p for p in foreign if p.board in members], facts_of)
    # one range for every board: the 80th percentile of every group's leave-one-out and foreign errors together
    # (5 or 10 points of one group are too few for a percentile)
    spread = spread_from(rows + far)
    boards = {}
    for arch, members in GROUPS.items():
        mine = [p for p in points if p.board in members]
        if not mine:
            continue
        params = fit(mine, facts_of, spread)
        measured = sorted({p.board for p in mine})
        sources = sorted({p.source for p in mine})
        for board in members:
            boards[board] = dict(params.to_dict(), points=len(mine), source="; ".join(sources), group=arch,
                                 basis="fitted on {} published TensorRT latencies of {} boards ({}){}".format(
                                     len(mine), arch, ", ".join(measured),
                                     "" if board in measured else "; none of this board: its own data-sheet peaks"))
    return boards, rows, far


def _markdown_rows(rows, spread_of):
    out = ["| model | board | published ms | estimate ms | error | inside range |", "|---|---|---|---|---|---|"]
    for r in rows:
        f = math.exp(spread_of(r))
        out.append("| {} | {} | {} | {:.2f} | {:+.0%} | {} |".format(
            r["model"], r["board"], r["measured_ms"], r["estimate_ms"], r["error"],
            "yes" if r["estimate_ms"] / f <= r["measured_ms"] <= r["estimate_ms"] * f else "no"))
    return "\n".join(out)


def run_fit():
    from pipeline.estimate.calibration import board_params
    from pipeline.estimate.fit import MAX_SPREAD, fit, goal_statistics, predict_ms

    tables = json.loads(TABLES.read_text())
    points = points_of(CALIBRATION_POINTS, tables)
    boards, loo, far = group_fit(points, points_of(FOREIGN_POINTS, tables))
    # a board in no group gets its parameters through the data-sheet peaks of others: the widest range (2.5x)
    default = fit(points, facts_of, MAX_SPREAD)
    calibration = {"default": dict(default.to_dict(), points=len(points), fitted_on=", ".join(
        sorted({p.board for p in points}))), "boards": boards,
        "method": "grid search, squared log error, per GPU architecture; docs/estimate.md"}
    CALIBRATION.write_text(json.dumps(calibration, indent=1, sort_keys=True) + "\n")
    spread = {b: e["spread"] for b, e in boards.items()}
    check = []
    call_ms, shared = torch2trt_call_ms()
    for point in points_of(CHECK_POINTS, tables):
        params, _ = board_params(point.board)
        # the engine's time, plus torch2trt's own per-call time (derived from the shared models, below)
        est = predict_ms(point, facts_of(point.board), params, overhead=False) + call_ms
        check.append({"model": point.model, "board": point.board, "measured_ms": point.ms, "seen": point.model in
                      shared, "estimate_ms": round(est, 3), "error": round(est / point.ms - 1, 4),
                      "spread": params.spread})
    print("## Calibration (parameters)\n\n```\n" + json.dumps(calibration, indent=1, sort_keys=True) + "\n```\n")
    print("## Leave-one-model-out (within each architecture group)\n")
    print(_markdown_rows(loo, lambda r: spread[r["board"]]))
    print("\nstatistics all groups (range x{:.2f}):".format(math.exp(2 * spread["jetson_nano"])),
          json.dumps(goal_statistics(loo, spread["jetson_nano"])))
    for arch, members in GROUPS.items():
        rows = [r for r in loo if r["board"] in members]
        if rows:
            print("\nstatistics {} (range x{:.2f}):".format(arch, math.exp(2 * spread[members[0]])),
                  json.dumps(goal_statistics(rows, spread[members[0]])))
    print("\n## Other setups (never fitted; part of the range's width): published vs the engine estimate without the "
          "model's family\n")
    print(_markdown_rows(far, lambda r: spread[r["board"]]))
    print("\nstatistics other setups:", json.dumps(goal_statistics(far, spread["jetson_nano"])))
    print("\nstatistics leave-one-out and other setups together (the range's evidence):",
          json.dumps(goal_statistics(loo + far, spread["jetson_nano"])))
    print("\n## Independent check (torch2trt tables, never fitted)\n")
    print(_markdown_rows(check, lambda r: r["spread"]))
    for board in ("jetson_nano", "agx_xavier", None):
        for unseen in (False, True):
            rows = [r for r in check if (board is None or r["board"] == board) and not (unseen and r["seen"])]
            if rows:
                print("\nstatistics {}{}:".format(board or "both", " (without the models the call time came from)"
                                                  if unseen else ""),
                      json.dumps(goal_statistics_mixed(rows)))


def torch2trt_call_ms():
    """(ms, models): torch2trt's figure times the PyTorch module's call (with its synchronize), not the engine
    alone. Where torch2trt and NetsPresso (engine-only) measured the same model on the same board (ResNet-18/34/50
    on the Nano and the AGX Xavier), the difference is that per-call time: its median is added to every engine
    estimate compared with torch2trt, and the statistics are given again without those models."""
    import statistics

    engine = {(m, b): ms for m, b, _, _, ms, _ in CALIBRATION_POINTS}
    pairs = [(m, ms - engine[(m + "_c3", b)]) for m, b, _, _, ms, _ in CHECK_POINTS if (m + "_c3", b) in engine]
    print("torch2trt minus NetsPresso (ms):", [(m, round(d, 3)) for m, d in pairs], file=sys.stderr)
    return statistics.median(d for _, d in pairs), {m for m, _ in pairs}


def goal_statistics_mixed(rows):
    """goal_statistics over rows whose boards may have different ranges (each row's own spread)."""
    from pipeline.estimate.fit import goal_statistics

    stats = goal_statistics(rows, rows[0]["spread"])
    inside = sum(1 for r in rows if r["estimate_ms"] / math.exp(r["spread"]) <= r["measured_ms"]
                 <= r["estimate_ms"] * math.exp(r["spread"]))
    stats["inside_range"] = round(inside / len(rows), 4)
    stats["range_ratio"] = round(max(math.exp(2 * r["spread"]) for r in rows), 3)
    return stats


def main(argv):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if not argv or argv[0] not in ("tables", "fit"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "tables":
        names = argv[1:] or sorted({p[0] for p in CALIBRATION_POINTS + TF_TRT_POINTS + CHECK_POINTS})
        build_tables(names)
    else:
        run_fit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
