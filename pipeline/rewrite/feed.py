"""What the numeric checks of `deploy rewrite` (and the rewrite stage) feed a TensorFlow graph.

    feed = check_feed(graph, io, dataset=None, count=4, shape=None)
    feed.arrays    # {input name: array with ``count`` samples on axis 0}; {} when not compared
    feed.source    # the receipt's "inputs": what was fed, or why nothing was
    feed.skipped   # None, or why the outputs cannot be compared (then every pass is applied unchecked)

What each input gets:
- one NHWC image input (rank 4, fixed height, width and channels; graph/io.image_input's rule):
  images from ``dataset`` or seeded random pixels (0..255), as before;
- an integer input that feeds an embedding lookup (Gather of a weight constant): seeded token ids
  below that constant's first dimension (the vocabulary size);
- a float input of any other shape (a sequence, a feature vector): seeded standard-normal values.
Unknown dimensions after the batch are given ``SEQUENCE_LENGTH``; an image with unknown height or
width is refused (its size cannot be guessed: set it with set_input_shape). Anything else (an
integer input no embedding reads, bool, string, unknown rank) is not compared, with the reason. An
input nothing reads is not fed.

``shape``: (input name or None, dims) of a set_input_shape in the passes to apply: the samples take
the shape the graph will have, so they fit before and after the pass. The batch dimension is
``count`` here; a graph whose batch is fixed (set_input_shape's documented batch of 1) is fed that
many samples at a time by the pass runner (pipeline.rewrite.engine.TFSubject).
"""

from dataclasses import dataclass, field
from typing import Dict, Optional

from pipeline.errors import DeployError

SEQUENCE_LENGTH = 16  # an unknown sequence length (a text model's [None, None] ids) in the samples
SUPPORTED = ("NHWC images (an image folder or random pixels), integer token ids below the vocabulary of the "
             "embedding they feed, float sequences or vectors (seeded normal values); unknown dimensions after "
             "the batch are {}".format(SEQUENCE_LENGTH))
_GATHERS = ("GatherV2", "Gather", "ResourceGather")
_INT = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_FLOAT = ("float16", "float32", "float64")


@dataclass
class Feed:
    arrays: Dict[str, object] = field(default_factory=dict)
    source: str = ""
    skipped: Optional[str] = None


def check_feed(graph, io, dataset=None, count=4, shape=None, seed=0, dataset_asked=True):
    """The samples for the numeric checks of ``graph`` (a TFGraph) with inputs ``io["inputs"]``. ``dataset_asked``:
    the image folder was asked for (``--dataset``), so a model without one image input is an error; False (the
    rewrite stage: the config's dataset, there for every stage) generates its samples and says so."""
    from pipeline.graph.io import image_input
    from pipeline.graph.view import UNKNOWN_RANK

    inputs = []
    for entry in io["inputs"]:
        name = entry["name"]
        node = graph.node(name)
        if not graph.consumers(name):  # read by nothing (convert_variables_to_constants_v2's unused_control_flow_input_N)
            continue
        dims = graph.attr(node, "shape", UNKNOWN_RANK)
        if shape is not None and (shape[0] == name or (shape[0] is None and len(io["inputs"]) == 1)):
            dims = list(shape[1])
        inputs.append((name, graph.attr(node, "dtype"), dims))
    image = image_input([(name, dims) for name, _, dims in inputs])
    if image is not None and inputs[0][1] in _FLOAT + ("uint8",):
        from pipeline.data.samples import sample_images

        name, height, width, channels = image
        if dataset is not None and not dataset_asked and channels != 3:  # the config's RGB folder, for every stage
            images, source = sample_images(None, count, (height, width), seed, channels)
            return Feed({name: images}, "{} (dataset.path {} not used: its images are RGB, the model takes {} "
                                        "channel{})".format(source, dataset, channels, "" if channels == 1 else "s"))
        images, source = sample_images(dataset, count, (height, width), seed, channels)
        return Feed({name: images}, source)
    unused = ""
    if dataset is not None and not dataset_asked:
        unused = "dataset.path {} not used (not one NHWC image input); ".format(dataset)
    elif dataset is not None:
        raise DeployError("--dataset {}: the numeric checks feed images to a model with one NHWC image input; "
                          "this one takes {} (leave --dataset out: the checks then feed {})".format(
                              dataset, _inputs_text(inputs), SUPPORTED))
    import numpy as np

    rng = np.random.RandomState(seed)
    arrays, parts = {}, []
    for name, dtype, dims in inputs:
        why = _unfeedable(name, dtype, dims)
        if why is None and dtype in _INT:
            vocabulary = embedding_size(graph, name)
            if vocabulary is None:
                why = "integer input {} feeds no embedding lookup (Gather of a weight) whose size deploy can " \
                      "read, so which values it accepts is unknown".format(name)
        if why is not None:
            return Feed({}, unused + "not compared: " + why, why)
        full = [count] + [SEQUENCE_LENGTH if d is None else d for d in dims[1:]]
        if dtype in _INT:
            arrays[name] = rng.randint(0, vocabulary, size=full).astype(dtype)
            parts.append("{} {} token ids in [0, {}) shape {}".format(name, dtype, vocabulary, _dims_text(full)))
        else:
            arrays[name] = rng.standard_normal(full).astype(dtype)
            parts.append("{} {} normal values shape {}".format(name, dtype, _dims_text(full)))
    return Feed(arrays, unused + "generated, seed {}: {}".format(seed, "; ".join(parts)))


def _unfeedable(name, dtype, dims):
    """Why input ``name`` cannot be given generated samples, or None."""
    if dims is None:
        return "input {} has an unknown rank".format(name)
    if dtype not in _INT + _FLOAT:
        return "input {} is {}; the numeric checks feed {}".format(name, dtype, SUPPORTED)
    if not dims:
        return "input {} is a scalar (no batch dimension to place samples on)".format(name)
    if len(dims) == 4 and dtype in _FLOAT and dims[3] in (1, 3, 4) and None in dims[1:3]:
        raise DeployError("input {} has shape {}: an image of unknown height or width, which the numeric checks "
                          "cannot guess; give it with --pass set_input_shape --input-shape {}=1,224,224,{} "
                          "(stages.rewrite.options.set_input_shape.shape)".format(name, _dims_text(dims), name,
                                                                                  dims[3]))
    if any(d is not None and d <= 0 for d in dims[1:]):
        return "input {} has shape {} (an empty dimension)".format(name, _dims_text(dims))
    return None


def embedding_size(graph, name, depth=8):
    """The vocabulary of the embedding lookup integer input ``name`` feeds: the first dimension of the
    weight a Gather reads at the ids (reached through at most ``depth`` elementwise nodes, e.g. Keras'
    negative-index fix-up), else None. The smallest when there are several."""
    found, frontier, seen = [], [name], {name}
    for _ in range(depth):
        following = []
        for current in frontier:
            for consumer in graph.consumers(current):
                if consumer.name in seen:
                    continue
                seen.add(consumer.name)
                if consumer.op in _GATHERS and len(consumer.input) >= 2:
                    weight = graph.const_value(graph.producer(consumer.input[0]))
                    if weight is not None and getattr(weight, "ndim", 0) >= 1:
                        found.append(int(weight.shape[0]))
                    continue
                following.append(consumer.name)
        frontier = following
    return min(found) if found else None


def _dims_text(dims):
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _inputs_text(inputs):
    return ", ".join("{} {} {}".format(name, dtype, "?" if dims is None else _dims_text(dims))
                     for name, dtype, dims in inputs)
