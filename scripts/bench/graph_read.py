#!/usr/bin/env python3
"""How long ``pipeline.graph.read_model`` takes on big graphs, per node (goal: 200k nodes well under 5 s).

    python scripts/bench/graph_read.py [--sizes 1000,10000,100000,200000] [--repeat 3] [--formats pb,saved_model]

Generates graphs with deploy's own protobuf classes (no TensorFlow): repeated blocks of
Const (3x3x16x16 float weights) -> Conv2D -> Const (16 biases) -> BiasAdd -> Relu, 5 nodes a
block, like a frozen CNN. Formats:

  pb           a frozen GraphDef ``.pb`` (the plain path: no functions)
  saved_model  the same nodes inside a function a StatefulPartitionedCall calls, in a SavedModel
               with a serving signature (the path that walks back from the outputs and inlines)
  pbtxt        the frozen graph as text (protobuf's pure-Python text parser: slow, off by default)

Each size and format is read ``--repeat`` times, each in a fresh process (so one read's memory
does not slow the next); the best wall time of ``read_model`` is reported, with time per node,
plus one JSON line for tooling. Attributes are decoded lazily and not touched here.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BLOCK = 5  # nodes per block

TIMER = """
import sys, time
t0 = time.perf_counter()
from pipeline.graph import read_model, proto  # noqa: F401 - imports (and the message classes) not timed
import google.protobuf.message  # noqa: F401
t1 = time.perf_counter()
graph = read_model(sys.argv[1])
t2 = time.perf_counter()
print(t2 - t1, t1 - t0, len(graph.nodes))
"""


def _weights(proto, n_elements_shape, seed):
    import numpy as np

    t = proto.TensorProto(dtype=proto.DataType["DT_FLOAT"])
    for d in n_elements_shape:
        t.tensor_shape.dim.add(size=d)
    t.tensor_content = np.random.default_rng(seed).standard_normal(n_elements_shape, dtype=np.float32).tobytes()
    return t


def _blocks(proto, container, n_nodes, first_input, arg_style=False):
    """Append ``n_nodes`` nodes (Conv blocks) to ``container``; returns the last tensor."""
    dt_float = proto.DataType["DT_FLOAT"]
    weights = _weights(proto, (3, 3, 16, 16), 0)
    bias = _weights(proto, (16,), 1)
    prev = first_input
    for i in range(n_nodes // BLOCK):
        p = "block{}/".format(i)
        w = container.add(name=p + "w", op="Const")
        w.attr["dtype"].type = dt_float
        w.attr["value"].tensor.CopyFrom(weights)
        conv = container.add(name=p + "Conv2D", op="Conv2D",
                             input=[prev, p + "w:output:0" if arg_style else p + "w"])
        conv.attr["T"].type = dt_float
        conv.attr["strides"].list.i.extend([1, 1, 1, 1])
        conv.attr["dilations"].list.i.extend([1, 1, 1, 1])
        conv.attr["padding"].s = b"SAME"
        conv.attr["data_format"].s = b"NHWC"
        conv.attr["use_cudnn_on_gpu"].b = True
        b = container.add(name=p + "b", op="Const")
        b.attr["dtype"].type = dt_float
        b.attr["value"].tensor.CopyFrom(bias)
        add = container.add(name=p + "BiasAdd", op="BiasAdd", input=[
            p + "Conv2D:output:0" if arg_style else p + "Conv2D", p + "b:output:0" if arg_style else p + "b"])
        add.attr["T"].type = dt_float
        relu = container.add(name=p + "Relu", op="Relu", input=[p + "BiasAdd:output:0" if arg_style else p + "BiasAdd"])
        relu.attr["T"].type = dt_float
        prev = p + "Relu:activations:0" if arg_style else p + "Relu"
    return prev


def _placeholder(proto, container, name):
    x = container.add(name=name, op="Placeholder")
    x.attr["dtype"].type = proto.DataType["DT_FLOAT"]
    for d in (-1, 32, 32, 16):
        x.attr["shape"].shape.dim.add(size=d)


def write_frozen(path, n_nodes, as_text=False):
    from google.protobuf import text_format

    from pipeline.graph import proto

    gd = proto.GraphDef()
    _placeholder(proto, gd.node, "input")
    last = _blocks(proto, gd.node, n_nodes - 2, "input")
    gd.node.add(name="output", op="Identity", input=[last]).attr["T"].type = proto.DataType["DT_FLOAT"]
    if as_text:
        path.write_text(text_format.MessageToString(gd))
    else:
        path.write_bytes(gd.SerializeToString())
    return len(gd.node)


def write_saved_model(directory, n_nodes):
    from pipeline.graph import proto

    sm = proto.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    gd = mg.graph_def
    _placeholder(proto, gd.node, "serving_default_input")
    call = gd.node.add(name="StatefulPartitionedCall", op="StatefulPartitionedCall", input=["serving_default_input"])
    call.attr["f"].func.name = "__inference_serve_1"
    f = gd.library.function.add()
    f.signature.name = "__inference_serve_1"
    f.signature.input_arg.add(name="input", type=proto.DataType["DT_FLOAT"])
    f.signature.output_arg.add(name="identity", type=proto.DataType["DT_FLOAT"])
    last = _blocks(proto, f.node_def, n_nodes - 2, "input", arg_style=True)
    f.node_def.add(name="Identity", op="Identity", input=[last])
    f.ret["identity"] = "Identity:output:0"
    sig = mg.signature_def["serving_default"]
    sig.inputs["input"].name = "serving_default_input:0"
    sig.outputs["output"].name = "StatefulPartitionedCall:0"
    directory.mkdir()
    (directory / "saved_model.pb").write_bytes(sm.SerializeToString())
    return 1 + len(f.node_def)


def time_read(path, repeat):
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", TIMER, str(path)], cwd=str(ROOT), check=True,
                             capture_output=True, text=True).stdout.split()
        read_s, import_s, n = float(out[0]), float(out[1]), int(out[2])
        best = min(best or read_s, read_s)
    return best, import_s, n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,200000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--formats", default="pb,saved_model", help="comma-separated: pb, saved_model, pbtxt")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    formats = args.formats.split(",")
    results = []
    print("{:<12} {:>8} {:>9} {:>10} {:>11}".format("format", "nodes", "file MB", "read s", "us / node"))
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in formats:
            for size in sizes:
                if fmt == "pb":
                    path = Path(tmp) / "g{}.pb".format(size)
                    write_frozen(path, size)
                    size_bytes = path.stat().st_size
                elif fmt == "pbtxt":
                    path = Path(tmp) / "g{}.pbtxt".format(size)
                    write_frozen(path, size, as_text=True)
                    size_bytes = path.stat().st_size
                elif fmt == "saved_model":
                    path = Path(tmp) / "sm{}".format(size)
                    write_saved_model(path, size)
                    size_bytes = (path / "saved_model.pb").stat().st_size
                else:
                    parser.error("unknown format {!r}".format(fmt))
                seconds, import_s, n = time_read(path, args.repeat)
                per_node = seconds / n * 1e6
                print("{:<12} {:>8} {:>9.1f} {:>10.3f} {:>11.2f}".format(fmt, n, size_bytes / 1e6, seconds, per_node))
                results.append({"format": fmt, "nodes": n, "file_mb": round(size_bytes / 1e6, 1),
                                "read_s": round(seconds, 4), "us_per_node": round(per_node, 2)})
    print("(import pipeline.graph: {:.3f} s, not included)".format(import_s))
    print(json.dumps({"benchmark": "graph_read", "repeat": args.repeat, "results": results}))


if __name__ == "__main__":
    main()
