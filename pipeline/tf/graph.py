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
    from pipeline.graph.readers import sniff_protobuf

    graph_def = tf.compat.v1.GraphDef()
    try:
        if sniff_protobuf(path, "text" if path.suffix == ".pbtxt" else "binary") == "text":
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


def run_graph_def(graph_def, io, feeds, source="the frozen graph"):
    """Run the graph on ``feeds`` ({input name: array}); returns [array per io output]. What the
    outputs need is screened first (pipeline.tf.screen): nothing runs that could act outside it."""
    from pipeline.tf import import_tf
    from pipeline.tf.screen import screen_graph

    screen_graph(graph_def, source, outputs=[o["name"] for o in io["outputs"]])
    tf = import_tf()
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(seeded_graph_def(graph_def), name="")  # repeatable, whatever it holds
    fetches = [graph.get_tensor_by_name(o["name"] + ":0") for o in io["outputs"]]
    feed_dict = {graph.get_tensor_by_name(name + ":0"): value for name, value in feeds.items()}
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(fetches, feed_dict)


DEPLOY_SEED = 87654321  # the seed seeded_graph_def gives unseeded random ops (not shown as theirs)
RANDOM_OPS = ("RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
              "ParameterizedTruncatedNormal", "Multinomial", "RandomShuffle", "RandomGamma", "RandomPoisson",
              "RandomPoissonV2", "RandomCrop")


def seeded_graph_def(graph_def):
    """A copy whose random ops all have a seed: one left at seed=0, seed2=0 (TensorFlow then draws
    a new one every session) gets seed2 from a hash of its name. Runs become repeatable; a
    stateful random op still draws new numbers on each run of one session."""
    import zlib

    if not any(n.op in RANDOM_OPS for n in graph_def.node):
        return graph_def
    copy = type(graph_def)()
    copy.CopyFrom(graph_def)
    for node in copy.node:
        if node.op in RANDOM_OPS and not node.attr["seed"].i and not node.attr["seed2"].i:
            node.attr["seed"].i = DEPLOY_SEED
            node.attr["seed2"].i = zlib.crc32(node.name.encode("utf-8")) & 0x7FFFFFFF or 1
    return copy


def read_io_json(path):
    """A graph's io.json (written by deploy's freeze and rewrite stages): {"inputs": [{"name", ...}],
    "outputs": [...]}. One-line DeployError naming the file for anything else (a foreign or
    malformed file beside a model)."""
    import json

    what = "{}: not deploy's io.json".format(path)
    try:
        with open(str(path), encoding="utf-8") as handle:
            io = json.load(handle)
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


def tensor_name(name):
    return name if ":" in name else name + ":0"


def load_for_run(path, io=None):
    """A frozen graph ready to run with one image input: (tf, graph_def, io, imported graph, input
    tensor). ``io`` as given, else io.json next to the graph (deploy's freeze stage writes it), else
    ``infer_io``. Random ops are seeded (repeatable runs) and the graph is screened (nothing runs
    that could act outside it)."""
    from pipeline.tf import import_tf

    tf = import_tf()
    graph_def = seeded_graph_def(load_graph_def(path))
    side, where = Path(path).parent / "io.json", "io"
    if io is None and side.is_file():
        io, where = read_io_json(side), str(side)
    io = io or infer_io(graph_def)
    names = {n.name for n in graph_def.node}
    missing = [s["name"] for s in io["inputs"] + io["outputs"] if s["name"].split(":")[0] not in names]
    if missing:
        raise DeployError("{} names {} that {} does not have{}".format(
            where, ", ".join(missing), path, "; it belongs to another graph: move it away" if where != "io" else ""))
    if len(io["inputs"]) != 1:
        raise DeployError("consistency checks models with one image input; {} has {} ({})".format(
            path, len(io["inputs"]), ", ".join(i["name"] for i in io["inputs"])))
    from pipeline.tf.screen import screen_graph

    screen_graph(graph_def, path, outputs=[o["name"] for o in io["outputs"]])
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    return tf, graph_def, io, graph, graph.get_tensor_by_name(tensor_name(io["inputs"][0]["name"]))
