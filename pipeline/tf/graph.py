"""Load and run frozen GraphDefs with TensorFlow (the reference for numeric comparisons)."""

from pathlib import Path

from pipeline.errors import DeployError


def load_graph_def(path):
    """Read a frozen graph (.pb binary or .pbtxt text) with a clear error for anything else."""
    from pipeline.tf import import_tf

    tf = import_tf()
    from google.protobuf import message, text_format

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DeployError("{}: cannot read frozen graph: {}".format(path, e.strerror or e))
    if not data:
        raise DeployError("{}: file is empty; expected a frozen GraphDef".format(path))
    graph_def = tf.compat.v1.GraphDef()
    try:
        if path.suffix == ".pbtxt":
            text_format.Parse(data.decode("utf-8"), graph_def)
        else:
            graph_def.ParseFromString(data)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        raise DeployError("{}: not a GraphDef ({}); expected a frozen .pb or .pbtxt".format(path, str(e).splitlines()[0]))
    if not graph_def.node:
        raise DeployError("{}: GraphDef has no nodes".format(path))
    return graph_def


def infer_io(graph_def):
    """Inputs = Placeholders; outputs = nodes nothing consumes (Const/NoOp excluded)."""
    consumed = {i.lstrip("^").split(":")[0] for n in graph_def.node for i in n.input}
    inputs, outputs = [], []
    for node in graph_def.node:
        if node.op == "Placeholder":
            dtype = node.attr["dtype"].type
            shape = node.attr["shape"].shape
            dims = None if shape.unknown_rank else [d.size if d.size >= 0 else None for d in shape.dim]
            inputs.append({"name": node.name, "dtype": _dtype_name(dtype), "shape": dims})
        elif node.name not in consumed and node.op not in ("Const", "NoOp", "Assert", "SaveV2", "RestoreV2"):
            outputs.append({"name": node.name, "dtype": None, "shape": None})
    if not inputs or not outputs:
        raise DeployError("cannot tell the graph's inputs and outputs (found {} Placeholders, {} sink nodes)".format(len(inputs), len(outputs)))
    return {"inputs": inputs, "outputs": outputs}


def _dtype_name(enum):
    from pipeline.tf import import_tf

    return import_tf().dtypes.as_dtype(enum).name


def run_graph_def(graph_def, io, feeds):
    """Run the graph on ``feeds`` ({input name: array}); returns [array per io output]."""
    from pipeline.tf import import_tf

    tf = import_tf()
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    fetches = [graph.get_tensor_by_name(o["name"] + ":0") for o in io["outputs"]]
    feed_dict = {graph.get_tensor_by_name(name + ":0"): value for name, value in feeds.items()}
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(fetches, feed_dict)
