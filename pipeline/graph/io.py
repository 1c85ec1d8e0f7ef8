"""One answer to "what are this graph's inputs and outputs", for every command and stage.

    io = graph_io(graph_def, "frozen.pb")   # {"inputs": [{name, tensor, dtype, shape}], "outputs": [{name, tensor}]}
    io = graph_io(graph_def, path, outputs=["logits"])
    image_input(io["inputs"])               # ("input", 224, 224, 3): the model's one NHWC image input, or None
    channels_first((None, 3, 224, 224))     # True: a rank-4 shape that reads as [N, C, H, W]

The rule, in order:
1. ``outputs`` given (``--outputs``): those nodes are the outputs; inputs as below.
2. A sidecar beside the graph: ``<stem>.io.json`` (``deploy rewrite -o x.pb`` writes ``x.io.json``),
   or ``io.json`` beside a ``frozen.pb`` (the freeze and rewrite stages write it). Names it gives
   that the graph does not have are an error naming the sidecar (it belongs to another graph).
3. The graph's structure: Placeholders in, nodes nothing consumes out, except ops that are never
   outputs (``NOT_OUTPUTS``: constants, no-ops, asserts, saver ops).

The graph view (``pipeline.graph.readers``) uses the same ``NOT_OUTPUTS``. Works on TensorFlow's
GraphDef and on ``pipeline.graph.proto``'s: no TensorFlow is imported.
"""

import json
from pathlib import Path

from pipeline.errors import DeployError

INPUT_OPS = frozenset(["Placeholder"])
NOT_OUTPUTS = frozenset(["Const", "NoOp", "Assert", "Placeholder", "PlaceholderWithDefault", "SaveV2", "Save",
                         "SaveSlices", "RestoreV2", "Restore", "RestoreSlice", "MergeV2Checkpoints"])


def sidecar(path):
    """The io.json that describes the graph at ``path``, or None (see the module doc, rule 2)."""
    path = Path(path)
    own = path.with_name(path.stem + ".io.json")
    if own.is_file():
        return own
    shared = path.parent / "io.json"
    return shared if path.name == "frozen.pb" and shared.is_file() else None


def graph_io(graph_def, path=None, outputs=None):
    """The graph's inputs and outputs by the module's rule; DeployError when it has none."""
    side = sidecar(path) if path is not None else None
    io = read_io_json(side) if side is not None else None
    names = {n.name for n in graph_def.node}
    if io is not None:
        missing = [s["name"] for s in io["inputs"] + io["outputs"] if s["name"].split(":")[0] not in names]
        if missing:
            raise DeployError("{} names {} that {} does not have; it belongs to another graph: move it away".format(
                side, ", ".join(missing), path))
    if outputs:
        unknown = [o for o in outputs if o.split(":")[0] not in names]
        if unknown:
            raise DeployError("--outputs: no node {!r} in {}".format(unknown[0], path or "the graph"))
        base = io or structural_io(graph_def, need_outputs=False)
        return {"inputs": base["inputs"], "outputs": [{"name": o} for o in outputs]}
    return io or structural_io(graph_def)


def structural_io(graph_def, need_outputs=True):
    """Rule 3: Placeholders in (with dtype and shape), sinks out."""
    from pipeline.graph.proto import dtype_name

    consumed = {i.lstrip("^").split(":")[0] for n in graph_def.node for i in n.input}
    inputs, outputs = [], []
    for node in graph_def.node:
        if node.op in INPUT_OPS:
            shape = node.attr["shape"].shape
            dims = None if shape.unknown_rank else [d.size if d.size >= 0 else None for d in shape.dim]
            inputs.append({"name": node.name, "tensor": node.name + ":0", "dtype": dtype_name(node.attr["dtype"].type),
                           "shape": dims})
        elif node.name not in consumed and node.op not in NOT_OUTPUTS:
            outputs.append({"name": node.name, "tensor": node.name + ":0"})
    if not inputs or (need_outputs and not outputs):
        raise DeployError("cannot tell the graph's inputs and outputs (found {} Placeholders, {} sink nodes); "
                          "name them with --outputs or an io.json beside the graph".format(len(inputs), len(outputs)))
    return {"inputs": inputs, "outputs": outputs}


def read_io_json(path):
    """A graph's io.json (written by deploy's freeze and rewrite stages): {"inputs": [{"name", ...}],
    "outputs": [...]}. One-line DeployError naming the file for anything else (a foreign or
    malformed file beside a model)."""
    what = "{}: not deploy's io.json".format(path)
    from pipeline.files import SIDE_FILE_BYTES, read_regular

    try:  # a regular file of at most 16 MiB: a named pipe by this name is refused, never waited on
        io = json.loads(read_regular(path, "an io.json", SIDE_FILE_BYTES).decode("utf-8"))
    except RecursionError:
        raise DeployError("{} (nested too deeply); delete or move it".format(what)) from None
    except (OSError, ValueError) as e:
        raise DeployError("{} ({}); delete or move it to let deploy infer the graph's inputs and outputs".format(
            what, " ".join(str(e).split())[:120])) from None
    if not isinstance(io, dict):
        raise DeployError("{} (a JSON {}, not an object with inputs and outputs); delete or move it".format(
            what, type(io).__name__))
    for key in ("inputs", "outputs"):
        entries = io.get(key)
        if not isinstance(entries, list) or not entries:
            raise DeployError("{} (no {} list); delete or move it, or give the model's {} another way".format(
                what, key, key))
        for k, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise DeployError("{} ({}[{}] has no name); delete or move it".format(what, key, k))
            entry["name"] = entry["name"].split(":")[0] if entry["name"].endswith(":0") else entry["name"]
    return io


def write_io_json(path, io, final_newline=True):
    """Write a graph's io.json atomically (``pipeline.files.write_json``); the stages' io.json keeps the
    bytes it always had (no final newline: a later stage's cache key holds its sha256)."""
    from pipeline.files import write_json

    write_json(path, io, final_newline=final_newline)


def tensor_name(name):
    """``node`` -> ``node:0``; ``node:1`` stays."""
    return name if ":" in name else name + ":0"


def image_input(inputs):
    """(name, height, width, channels) of the model's one NHWC image input, else None: exactly one input,
    of rank 4, with fixed positive height, width and channels (the batch may be dynamic). ``inputs``:
    io.json-style dicts ({"name", "shape"}) or a session's / ONNX model's (name, shape) pairs. The one
    rule for every stage that feeds images (convert's comparison, the benchmark's feed and batch
    consistency, int8 calibration, the UFF route); a caller feeding dataset images (RGB) also needs
    channels == 3."""
    if len(inputs) != 1:
        return None
    entry = inputs[0]
    name, shape = (entry.get("name"), entry.get("shape")) if isinstance(entry, dict) else (entry[0], entry[1])
    if shape is None or len(shape) != 4:
        return None
    height, width, channels = shape[1:]
    if not all(isinstance(d, int) and d > 0 for d in (height, width, channels)):
        return None
    return name, height, width, channels


def channels_first(shape):
    """True when a rank-4 ``shape`` reads as [N, C, H, W]: its last dimension is not a channel count (1, 3
    or 4) and its second is. A guess, for models that do not say (an ONNX export of a PyTorch model):
    [N, 3, 3, 3] reads as NHWC. Reorder a channels-first shape to NHWC before ``image_input``'s rule."""
    return shape is not None and len(shape) == 4 and shape[3] not in (1, 3, 4) and shape[1] in (1, 3, 4)
