"""Unfreeze: a frozen graph's weight constants back into tf.Variables, as a SavedModel that trains in TF2.

The frozen GraphDef is imported inside a ``tf.function`` with its weight constants replaced
(``input_map``) by variables of the same names and values, so gradients flow to them:

    module = tf.saved_model.load("unfrozen/")
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, module.serve(images)["probabilities"])
    grads = tape.gradient(loss, module.weights)

The serving signature keeps the original input and output names.
"""

from pathlib import Path

from pipeline.errors import DeployError

# Ops whose non-first inputs are weights (and FusedBatchNorm's scale/offset/mean/variance).
_WEIGHT_CONSUMERS = ("Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "MatMul", "BatchMatMulV2", "BiasAdd",
                     "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "Mul", "Add", "AddV2", "Sub")


def weight_constants(graph_def, scopes=None):
    """Names of float Const nodes (more than one element) that feed a weight input of a conv,
    matmul, bias or batch-norm op (optionally only under ``scopes``)."""
    import numpy as np

    from pipeline.tf import import_tf

    tf = import_tf()
    consts = {n.name: n for n in graph_def.node if n.op == "Const"}
    chosen = []
    for node in graph_def.node:
        if node.op not in _WEIGHT_CONSUMERS:
            continue
        for tensor in node.input[1:]:
            name = tensor.split(":")[0].lstrip("^")
            const = consts.get(name)
            if const is None or name in chosen:
                continue
            value = tf.make_ndarray(const.attr["value"].tensor)
            if value.dtype == np.float32 and value.size > 1 and (not scopes or any(name.startswith(s) for s in scopes)):
                chosen.append(name)
    return chosen


def unfreeze(frozen_path, out_dir, scopes=None, io=None):
    """Write a trainable SavedModel for ``frozen_path``; returns {"variables": [...], "inputs", "outputs"}."""
    from pipeline.tf import import_tf
    from pipeline.tf.graph import infer_io, load_graph_def, read_io_json

    tf = import_tf()
    graph_def = load_graph_def(frozen_path)
    if io is None:
        io_path = Path(frozen_path).with_name("io.json")
        io = read_io_json(io_path) if io_path.exists() else infer_io(graph_def)
    names = weight_constants(graph_def, scopes)
    if not names:
        raise DeployError("{}: no weight constants to unfreeze{} (constants feeding Conv2D, MatMul, BiasAdd or "
                          "batch norm ops)".format(frozen_path, " under " + ", ".join(scopes) if scopes else ""))
    if len(io["inputs"]) != 1:
        raise DeployError("{}: unfreeze supports one input, the graph has {}".format(frozen_path, len(io["inputs"])))
    consts = {n.name: n for n in graph_def.node}
    module = tf.Module()
    module.weights_by_name = {}
    for name in names:
        module.weights_by_name[name] = tf.Variable(tf.make_ndarray(consts[name].attr["value"].tensor), name=name)
    inp = io["inputs"][0]
    placeholder = consts[inp["name"]]
    shape = [d.size if d.size >= 0 else None for d in placeholder.attr["shape"].shape.dim]
    spec = tf.TensorSpec(shape, tf.as_dtype(placeholder.attr["dtype"].type), name=inp["name"])
    outputs = [o["name"] for o in io["outputs"]]

    @tf.function(input_signature=[spec])
    def serve(x):
        mapping = {inp["name"] + ":0": x}
        mapping.update({name + ":0": var.read_value() for name, var in module.weights_by_name.items()})
        results = tf.compat.v1.import_graph_def(graph_def, input_map=mapping,
                                                return_elements=[o + ":0" for o in outputs], name="graph")
        return {o: tf.identity(r, name=o) for o, r in zip(outputs, results)}

    module.serve = serve
    module.weights = list(module.weights_by_name.values())  # restored by tf.saved_model.load, in order
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise DeployError("-o {}: already exists and is not empty; choose a new directory".format(out_dir))
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="." + out_dir.name + ".", dir=str(out_dir.parent.resolve())))
    try:
        tf.saved_model.save(module, str(tmp), signatures={"serving_default": serve})
        if out_dir.exists():
            out_dir.rmdir()
        tmp.rename(out_dir)
    except (OSError, ValueError) as e:
        raise DeployError("-o {}: cannot write the SavedModel ({})".format(out_dir, str(e).splitlines()[0]))
    finally:
        shutil.rmtree(str(tmp), ignore_errors=True)
    return {"variables": names, "inputs": [inp["name"]], "outputs": outputs}
