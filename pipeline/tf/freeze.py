"""freeze_graph for TF2: a SavedModel signature to one GraphDef of constants, pruned to its outputs.

Names are made deterministic and readable: the constants that held variables are named after
their variables (``Conv1/kernel``) instead of TensorFlow's creation-order ``unknown_17``; control
edges, NoOps and pass-through Identity nodes are dropped; the input and output nodes carry the
signature's names (``input``, ``probabilities``), so ``io.json`` names tensors ``input:0``.
"""

from pipeline.errors import DeployError


def freeze_saved_model(saved_model_dir, signature="serving_default"):
    """Returns (graph_def, io) where io = {"inputs": [...], "outputs": [...]} (name, dtype, shape)."""
    from pipeline.tf import import_tf

    tf = import_tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    try:
        loaded = tf.saved_model.load(str(saved_model_dir))
    except (IndexError, RuntimeError) as e:  # the checkpoint reader's "Read less bytes than requested"
        raise DeployError("{}: cannot load SavedModel: its variables are truncated or corrupt ({}); export it "
                          "again".format(saved_model_dir, (str(e).splitlines() or [type(e).__name__])[0]))
    except (OSError, ValueError, KeyError, tf.errors.OpError) as e:
        raise DeployError("{}: cannot load SavedModel: {}; export it again".format(
            saved_model_dir, (str(e).splitlines() or [type(e).__name__])[0]))
    if signature not in loaded.signatures:
        raise DeployError("{}: no signature '{}' (has: {})".format(saved_model_dir, signature, ", ".join(loaded.signatures) or "none"))
    func = loaded.signatures[signature]
    by_handle = {id(v.handle): v for v in func.variables}
    var_names = {}
    for external, internal in func.graph.captures:
        var = by_handle.get(id(external))
        if var is not None:
            var_names[internal.op.name] = var.name.split(":")[0]
    frozen = convert_variables_to_constants_v2(func)
    graph_def = frozen.graph.as_graph_def()

    _, input_specs = func.structured_input_signature
    outputs = func.structured_outputs
    inputs = [{"name": name, "dtype": spec.dtype.name, "shape": spec.shape.as_list()} for name, spec in sorted(input_specs.items())]
    output_names = sorted(outputs)
    out_nodes = [t.op.name for t in frozen.outputs]
    # structured_outputs is a dict; frozen.outputs follows its flattened (sorted-key) order
    rename = dict(zip(out_nodes, output_names))
    rename.update({old: new for old, new in var_names.items()})
    graph_def = canonicalize(graph_def, rename, keep=[i["name"] for i in inputs] + output_names)
    io = {
        "inputs": inputs,
        "outputs": [{"name": n, "dtype": outputs[n].dtype.name, "shape": outputs[n].shape.as_list()} for n in output_names],
    }
    return graph_def, io


def canonicalize(graph_def, rename, keep):
    """Rename nodes, drop control edges / NoOps / pass-through Identities, prune to ``keep``."""
    from pipeline.tf import import_tf

    tf = import_tf()
    used = {n.name for n in graph_def.node}
    taken = set(used) - set(rename)
    final = {}
    for old, new in rename.items():
        if new in taken or new in final.values():
            new = _unique(new, taken | set(final.values()))
        final[old] = new

    def fix(inp):
        name, sep, port = inp.partition(":")
        return final.get(name, name) + sep + port

    out = tf.compat.v1.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    for node in graph_def.node:
        if node.op == "NoOp":
            continue
        new = out.node.add()
        new.CopyFrom(node)
        new.name = final.get(node.name, node.name)
        del new.input[:]
        new.input.extend(fix(i) for i in node.input if not i.startswith("^"))
    out = _bypass_identities(out, protected=set(keep))
    return tf.compat.v1.graph_util.extract_sub_graph(out, [k for k in keep if k not in _placeholders(out)] or keep)


def _placeholders(graph_def):
    return {n.name for n in graph_def.node if n.op == "Placeholder"}


def _bypass_identities(graph_def, protected):
    """Route consumers of single-input Identity nodes to the Identity's input."""
    target = {}
    for node in graph_def.node:
        if node.op == "Identity" and node.name not in protected and len(node.input) == 1:
            target[node.name] = node.input[0]

    def resolve(inp):
        seen = 0
        name, sep, port = inp.partition(":")
        while name in target and (not port or port == "0") and seen < 1000:
            inp = target[name]
            name, sep, port = inp.partition(":")
            seen += 1
        return inp

    for node in graph_def.node:
        resolved = [resolve(i) for i in node.input]
        del node.input[:]
        node.input.extend(resolved)
    return graph_def


def _unique(name, taken):
    i = 1
    while "{}_{}".format(name, i) in taken:
        i += 1
    return "{}_{}".format(name, i)


def write_graph_def(graph_def, path):
    """Serialize deterministically (same graph, same bytes)."""
    with open(str(path), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
