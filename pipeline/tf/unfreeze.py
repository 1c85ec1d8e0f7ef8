"""Unfreeze: a frozen graph's weight constants back into tf.Variables, as a SavedModel that trains in TF2.

Any frozen graph: deploy's own, TF1 ``convert_variables_to_constants`` (weights read through
``<name>/read`` Identity nodes), TF2 ``convert_variables_to_constants_v2`` (through the Identity
nodes its ``ReadVariableOp``s became). The GraphDef is imported inside a ``tf.function`` with its
weight constants replaced (``input_map``) by variables of the same names and values, so gradients
flow to them. The SavedModel follows the reusable-SavedModel convention TF Hub set:

    obj = tf.saved_model.load("unfrozen/")
    obj.variables, obj.trainable_variables          # every weight; the trainable ones
    probs = obj(images, training=False)              # one output: a tensor; several: a dict
    obj.signatures["serving_default"](input=images)  # the original input and output names

Trainable: kernels, biases, batch-norm gamma and beta, any other float weight, and every constant that
was a variable (read through ``<name>/read`` or a ``ReadVariableOp``), a scalar too (a learned exponent,
a scale). Non-trainable: batch norm's moving mean and variance (FusedBatchNorm inputs 3 and 4; in the
unfused form Keras 3 and ``tf.nn.batch_normalization`` write, the variance added to epsilon under a Rsqrt
and the mean multiplied by that Rsqrt and subtracted; or constants named ``.../moving_mean`` /
``.../moving_variance``), left as they are: the graph runs batch norm in its inference form, so training
changes gamma and beta, not the statistics.
"""

from pathlib import Path

from pipeline.errors import DeployError

_PASS_THROUGH = ("Identity", "Snapshot", "ReadVariableOp")
_FUSED_BN = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
_STAT_SUFFIXES = ("moving_mean", "moving_variance")
# ops whose inputs after the first are shapes, sizes, indices or axes, not weights
_NOT_WEIGHT_INPUTS = ("Reshape", "Shape", "Fill", "Tile", "Pad", "MirrorPad", "ResizeBilinear", "ResizeNearestNeighbor",
                      "StridedSlice", "Slice", "ConcatV2", "Transpose", "Mean", "Sum", "Max", "Min", "ExpandDims",
                      "Squeeze", "GatherV2", "Range")


def weight_constants(graph_def, scopes=None):
    """{const name: trainable?} for the float constants that reach a computation (directly or through
    Identity/read nodes) and either were variables or hold more than one value, optionally only under
    ``scopes``."""
    import numpy as np

    from pipeline.tf import import_tf

    tf = import_tf()
    by_name = {n.name: n for n in graph_def.node}
    consts = {n.name: n for n in graph_def.node if n.op == "Const"}
    consumers = {}
    for node in graph_def.node:
        for slot, tensor in enumerate(node.input):
            if not tensor.startswith("^"):
                consumers.setdefault(tensor.split(":")[0], []).append((node, slot))
    found = {}
    for node in graph_def.node:
        if node.op in _PASS_THROUGH or node.op == "Const":
            continue
        for slot, tensor in enumerate(node.input):
            if tensor.startswith("^") or (slot > 0 and node.op in _NOT_WEIGHT_INPUTS):
                continue
            name = _through(by_name, tensor.split(":")[0])
            const = consts.get(name)
            if const is None or (scopes and not any(name.startswith(s) for s in scopes)):
                continue
            value = tf.make_ndarray(const.attr["value"].tensor)
            if not np.issubdtype(value.dtype, np.floating) or (value.size < 2 and not _was_variable(name, consumers)):
                continue
            statistics = (node.op in _FUSED_BN and slot in (3, 4)) or name.rsplit("/", 1)[-1] in _STAT_SUFFIXES \
                or _unfused_statistic(node, by_name, consumers, consts)
            found[name] = found.get(name, True) and not statistics
    return found


def _was_variable(name, consumers):
    """Whether constant ``name`` was a variable before freezing: TF2's ``.../ReadVariableOp/resource``,
    or read by TF1's ``<name>/read`` or a ``ReadVariableOp`` Identity."""
    if name.endswith("/resource"):
        return True
    return any(c.op in _PASS_THROUGH and (c.name == name + "/read" or c.name.rsplit("/", 1)[-1].startswith("ReadVariableOp"))
               for c, _ in consumers.get(name, ()))


def _unfused_statistic(node, by_name, consumers, consts):
    """Whether ``node`` reads a moving statistic in the unfused batch norm (``tf.nn.batch_normalization``:
    ``inv = rsqrt(variance + eps) [* gamma]; x * inv + (beta - mean * inv)``): the variance is added to a
    constant epsilon under a Rsqrt, the mean multiplied by ``inv`` and subtracted (or negated)."""
    after = [c for c, _ in consumers.get(node.name, ())]
    if node.op in ("Add", "AddV2"):
        return any(c.op == "Rsqrt" for c in after) and any(
            _through(by_name, t.split(":")[0]) in consts for t in node.input)
    if node.op == "Mul":
        def from_rsqrt(tensor):
            producer = by_name.get(_through(by_name, tensor.split(":")[0]))
            return producer is not None and (producer.op == "Rsqrt" or (producer.op == "Mul" and any(
                getattr(by_name.get(_through(by_name, t.split(":")[0])), "op", None) == "Rsqrt" for t in producer.input)))

        return any(from_rsqrt(t) for t in node.input) and any(
            (c.op == "Sub" and slot == 1) or c.op == "Neg" for c, slot in consumers.get(node.name, ()))
    return False


def _through(by_name, name):
    """The node behind a chain of Identity/read nodes."""
    seen = 0
    node = by_name.get(name)
    while node is not None and node.op in _PASS_THROUGH and node.input and seen < 1000:
        name = node.input[0].split(":")[0]
        node = by_name.get(name)
        seen += 1
    return name


def unfreeze(frozen_path, out_dir, scopes=None, io=None, progress=None):
    """Write a trainable SavedModel for ``frozen_path``; returns {"variables", "trainable", "inputs", "outputs"}.
    ``progress``: a pipeline.progress.Progress told each step that runs long (reading, variables, saving)."""
    from pipeline.graph.parsing import sniff_protobuf
    from pipeline.progress import Progress
    from pipeline.tf import import_tf
    from pipeline.graph.io import graph_io
    from pipeline.tf.graph import load_graph_def

    frozen_path = Path(frozen_path)
    if frozen_path.is_file() and sniff_protobuf(frozen_path, "binary") == "onnx":
        raise DeployError("{}: unfreeze reads TensorFlow frozen graphs; this is ONNX (retrain the model it was "
                          "converted from, or its frozen .pb)".format(frozen_path))
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise DeployError("-o {}: already exists{}; choose a new directory".format(
            out_dir, " and is not empty" if out_dir.is_dir() else " as a file"))
    progress = progress or Progress("quiet")
    with progress.step("unfreeze {}: reading (step 1 of 3)".format(frozen_path)):
        tf = import_tf()
        graph_def = load_graph_def(frozen_path)
        io = io or graph_io(graph_def, frozen_path)
        from pipeline.tf.screen import screen_graph

        screen_graph(graph_def, frozen_path, outputs=[o["name"] for o in io["outputs"]])  # it runs when trained
        weights = weight_constants(graph_def, scopes)
        if not weights:
            raise DeployError("{}: no weight constants to unfreeze{} (float constants of more than one value that a "
                              "computation reads)".format(frozen_path, " under " + ", ".join(scopes) if scopes else ""))
        if len(io["inputs"]) != 1:
            raise DeployError("{}: unfreeze supports one input, the graph has {}".format(frozen_path, len(io["inputs"])))
    with progress.step("unfreeze: {} weights become variables, {} trainable (step 2 of 3)".format(
            len(weights), sum(weights.values()))):
        consts = {n.name: n for n in graph_def.node}
        variables = {name: tf.Variable(tf.make_ndarray(consts[name].attr["value"].tensor), name=name, trainable=trainable)
                     for name, trainable in weights.items()}
        inp = io["inputs"][0]
        placeholder = consts[inp["name"]]
        shape = [d.size if d.size >= 0 else None for d in placeholder.attr["shape"].shape.dim] \
            if not placeholder.attr["shape"].shape.unknown_rank else None
        spec = tf.TensorSpec(shape, tf.as_dtype(placeholder.attr["dtype"].type), name=inp["name"])
        outputs = [o["name"] for o in io["outputs"]]

        def run(x):
            mapping = {inp["name"] + ":0": x}
            mapping.update({name + ":0": var.read_value() for name, var in variables.items()})
            results = tf.compat.v1.import_graph_def(graph_def, input_map=mapping,
                                                    return_elements=[o + ":0" for o in outputs], name="graph")
            return {o: tf.identity(r, name=o) for o, r in zip(outputs, results)}

        serve = tf.function(run, input_signature=[spec], autograph=False)

        def call(inputs, training=False):  # the reusable-SavedModel signature; batch norm is in inference form either way
            out = run(inputs)
            return out[outputs[0]] if len(outputs) == 1 else out

        obj = tf.__internal__.tracking.AutoTrackable()
        obj.variables = list(variables.values())
        obj.trainable_variables = [v for v in obj.variables if v.trainable]
        obj.regularization_losses = []
        obj.weights = obj.variables  # deploy's earlier name for the list
        obj.__call__ = tf.function(call, autograph=False)
        for training in (False, True):
            obj.__call__.get_concrete_function(spec, training)
        obj.serve = serve
    with progress.step("unfreeze: tracing and writing the SavedModel {} (step 3 of 3)".format(out_dir)):
        _save(tf, obj, serve, out_dir)
    return {"variables": list(weights), "trainable": [n for n, t in weights.items() if t],
            "inputs": [inp["name"]], "outputs": outputs}


def _save(tf, obj, serve, out_dir):
    """tf.saved_model.save into a temporary folder beside ``out_dir``, renamed into place."""
    import shutil
    import tempfile

    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="." + out_dir.name + ".", dir=str(out_dir.parent.resolve())))
    except OSError as e:
        raise DeployError("-o {}: cannot create it ({})".format(out_dir, e.strerror or e))
    try:
        tf.saved_model.save(obj, str(tmp), signatures={"serving_default": serve})
        if out_dir.exists():
            out_dir.rmdir()
        tmp.rename(out_dir)
    except (OSError, ValueError) as e:
        raise DeployError("-o {}: cannot write the SavedModel ({})".format(out_dir, str(e).splitlines()[0]))
    finally:
        shutil.rmtree(str(tmp), ignore_errors=True)
