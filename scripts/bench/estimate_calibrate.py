#!/usr/bin/env python3
"""Calibrate `deploy estimate` on published TensorRT latencies, and check it on figures kept aside.

    python scripts/bench/estimate_calibrate.py tables     # build the models (TensorFlow), store their layer tables
    python scripts/bench/estimate_calibrate.py fit        # fit, leave-one-model-out, the independent check

``tables`` builds each model the way the field builds it (Keras applications with ``weights=None``,
frozen with convert_variables_to_constants_v2; ResNet-18/34, AlexNet, SqueezeNet and VGG-11/13 as small
Keras code after torchvision's definitions), strips the weights' values (their shapes stay) and reads the
frozen graph with deploy's own reader into engine layers (pipeline.estimate.layers), stored in
``targets/estimate/layer_tables.json`` so the fit and the tests need no TensorFlow.

``fit`` fits the parameters to the CALIBRATION figures (per board with figures, and ``default`` over
all of them for the boards without), writes ``targets/estimate/calibration.json``, and prints the
leave-one-model-out table and the independent check against torch2trt's tables (CHECK: never fitted)
as markdown for docs/estimate.md.
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
CALIBRATION_POINTS = [
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

    def resnet_basic(blocks):
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
        x = L.Dense(1000)(L.GlobalAveragePooling2D()(x))
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

    return [Point(model=m, board=b, precision=p, batch=n, ms=ms, layers=load_layers(m, tables), source=s)
            for m, b, p, n, ms, s in rows if m in tables]


def facts_of(board):
    from pipeline.targets.device import load_target

    return load_target(board).estimate


def run_fit():
    from pipeline.estimate.fit import MAX_SPREAD, fit, goal_statistics, leave_one_out, predict_ms, spread_from

    tables = json.loads(TABLES.read_text())
    points = points_of(CALIBRATION_POINTS, tables)
    loo = leave_one_out(points, facts_of)
    spread = spread_from(loo)
    # The leave-one-out errors measure a board's own figures; a board without figures gets its parameters
    # through the data-sheet peaks of another, an error no figure measured here: the widest range (2.5x).
    default = fit(points, facts_of, MAX_SPREAD)
    boards = {}
    for board in sorted({p.board for p in points}):
        mine = [p for p in points if p.board == board]
        params = fit(mine, facts_of, spread_from([r for r in loo if r["board"] == board]))
        boards[board] = dict(params.to_dict(), points=len(mine), source=mine[0].source)
    calibration = {"default": dict(default.to_dict(), points=len(points), fitted_on=", ".join(sorted(boards))),
                   "boards": boards, "method": "grid search, squared log error; docs/estimate.md"}
    CALIBRATION.write_text(json.dumps(calibration, indent=1, sort_keys=True) + "\n")
    check = []
    for point in points_of(CHECK_POINTS, tables):
        from pipeline.estimate.calibration import board_params

        params, _ = board_params(point.board)
        est = predict_ms(point, facts_of(point.board), params, overhead=False)  # the engine's time alone
        check.append({"model": point.model, "board": point.board, "measured_ms": point.ms,
                      "estimate_ms": round(est, 3), "error": round(est / point.ms - 1, 4), "spread": params.spread})
    print("## Calibration (parameters)\n\n```\n" + json.dumps(calibration, indent=1, sort_keys=True) + "\n```\n")
    print("## Leave-one-model-out\n\n| model | board | published ms | estimate ms | error | inside range |\n|---|---|---|---|---|---|")
    for r in loo:
        f = math.exp(spread)
        print("| {} | {} | {} | {:.2f} | {:+.0%} | {} |".format(r["model"], r["board"], r["measured_ms"], r["estimate_ms"],
                                                            r["error"], "yes" if r["estimate_ms"] / f <= r["measured_ms"]
                                                            <= r["estimate_ms"] * f else "no"))
    print("\nstatistics (the range at the leave-one-out spread, x{:.2f}):".format(math.exp(2 * spread)),
          json.dumps(goal_statistics(loo, spread)))
    print("\n## Independent check (torch2trt tables, never fitted)\n\n| model | board | published ms | estimate ms | "
          "error | inside range |\n|---|---|---|---|---|---|")
    for r in check:
        f = math.exp(r["spread"])
        print("| {} | {} | {} | {:.2f} | {:+.0%} | {} |".format(r["model"], r["board"], r["measured_ms"], r["estimate_ms"],
                                                            r["error"], "yes" if r["estimate_ms"] / f <= r["measured_ms"]
                                                            <= r["estimate_ms"] * f else "no"))
    for board in ("jetson_nano", "agx_xavier", None):
        rows = [r for r in check if board is None or r["board"] == board]
        print("\nstatistics {}:".format(board or "both"), json.dumps(goal_statistics(rows, rows[0]["spread"])))


def main(argv):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if not argv or argv[0] not in ("tables", "fit"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "tables":
        names = argv[1:] or sorted({p[0] for p in CALIBRATION_POINTS + CHECK_POINTS})
        build_tables(names)
    else:
        run_fit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
