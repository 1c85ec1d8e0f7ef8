"""Frozen GraphDefs with TensorFlow: read one with clear errors, and seed its random ops.

Running one is ``pipeline.backends.tensorflow``; its inputs and outputs are ``pipeline.graph.io``."""

from pathlib import Path

from pipeline.errors import DeployError
from pipeline.files import MODEL_BYTES, read_regular


def load_graph_def(path):
    """Read a frozen graph (.pb binary or .pbtxt text) with a clear error for anything else."""
    from pipeline.tf import import_tf

    tf = import_tf()
    from google.protobuf import message, text_format

    path = Path(path)
    try:  # a regular file within the model size limit: a named pipe or /dev/zero is refused by name, never read
        data = read_regular(path, "a frozen graph", MODEL_BYTES)
    except OSError as e:
        raise DeployError("{}: cannot read frozen graph: {}".format(path, e.strerror or e))
    if not data:
        raise DeployError("{}: file is empty; expected a frozen GraphDef".format(path))
    from pipeline.graph.parsing import sniff_protobuf

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
