"""Reading weights for partial restore: ``read_weights(path)`` -> {name: array} from a TF2 or TF1
checkpoint, a Keras model or weights file, or a frozen graph; ``inspect(path)`` lists them.
(Matching them to a model's variables is ``pipeline.train.restore``.)
"""

import re
import zipfile
from pathlib import Path

from pipeline.errors import DeployError

FORMATS = ("a TF2 or TF1 checkpoint (prefix or directory), a SavedModel directory, a Keras model (.keras), Keras "
           "weights (.weights.h5, .h5; a folder of them: the last), or a frozen graph (.pb)")
_TF2_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_TF2_SKIP = re.compile(r"(^|/)(optimizer|_optimizer|save_counter|\.OPTIMIZER_SLOT|_CHECKPOINTABLE_OBJECT_GRAPH)(/|$)")


class Weights(dict):
    """{name: numpy array} read from a file; ``kind`` says which format ("tf2", "tf1", "keras",
    "keras_weights", "h5", "pb") and ``source`` which file."""

    def __init__(self, items=(), kind="", source=""):
        super().__init__(items)
        self.kind = kind
        self.source = str(source)


# -- reading ---------------------------------------------------------------------------------------

def read_weights(path):
    """{name: numpy array} from a checkpoint, Keras file or frozen graph (a Weights dict)."""
    path = Path(str(path))
    name = path.name.lower()
    if name.endswith(".keras"):
        return _read_keras(_existing(path))
    if name.endswith((".h5", ".hdf5")):
        return _read_h5(_existing(path))
    if name.endswith(".pb") and path.is_file():
        return _read_pb(path)
    if path.is_dir():
        if (path / "saved_model.pb").is_file() and (path / "variables" / "variables.index").is_file():
            return _read_checkpoint(path / "variables" / "variables")  # a SavedModel: its variables
        if not list(path.glob("*.index")):
            latest = sorted(path.glob("*.weights.h5"))
            if latest:  # deploy's train stage folder (epoch_001.weights.h5, ...): the last epoch
                return _read_h5(latest[-1])
    return _read_checkpoint(path)


def weights_file_exists(path):
    """Whether ``path`` names something read_weights can read: a file, a directory, or a
    checkpoint prefix (``dir/model.ckpt-60`` for ``model.ckpt-60.index`` and its data files)."""
    path = Path(str(path))
    return path.exists() or Path(str(path) + ".index").is_file()


def inspect(path):
    """[(name, shape, dtype, size)] of what ``path`` holds, sorted by name; size = element count."""
    weights = read_weights(path)
    rows = []
    for name in sorted(weights):
        value = weights[name]
        rows.append((name, tuple(int(d) for d in value.shape), str(value.dtype), int(value.size)))
    return rows


def _existing(path):
    if not path.exists():
        raise DeployError("{}: no such file; expected {}".format(path, FORMATS))
    if not path.is_file():
        raise DeployError("{}: is not a file; expected {}".format(path, FORMATS))
    return path


def first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _read_keras(path):
    import numpy as np

    from pipeline.tf import import_tf

    import_tf()
    import keras

    from pipeline.tf.keras_model import keras_file_problem

    problem = keras_file_problem(path)
    if problem:
        raise DeployError("{}: {}; expected {}".format(path, problem, FORMATS))
    try:
        model = keras.models.load_model(str(path), compile=False, safe_mode=True)
    except Exception as e:  # keras raises many types for a bad file
        # A model with custom layers cannot be rebuilt here: its weights file can still be read.
        try:
            with zipfile.ZipFile(str(path)) as z, z.open("model.weights.h5") as f:
                import io

                return _read_h5_file(io.BytesIO(f.read()), path, kind="keras_weights")
        except Exception:
            raise DeployError("{}: cannot read this Keras model: {}; expected {}".format(path, first_line(e), FORMATS))
    weights = Weights(kind="keras", source=path)
    for v in model.weights:
        weights[v.path] = np.asarray(v.numpy())
    return weights


def _read_h5(path):
    return _read_h5_file(str(path), path, kind=None)


def _read_h5_file(handle, path, kind):
    import h5py
    import numpy as np

    try:
        f = h5py.File(handle, "r")
    except Exception as e:
        raise DeployError("{}: not a readable HDF5 weights file ({}); expected {}".format(
            path, first_line(e), FORMATS))
    with f:
        root = f["model_weights"] if "model_weights" in f else f
        if "layer_names" in root.attrs:  # legacy Keras (tf.keras, or keras 3 model.save("x.h5"))
            weights = Weights(kind="h5", source=path)
            for layer in root.attrs["layer_names"]:
                layer = layer.decode() if isinstance(layer, bytes) else str(layer)
                group = root[layer]
                for wname in group.attrs.get("weight_names", []):
                    wname = wname.decode() if isinstance(wname, bytes) else str(wname)
                    weights[strip_port(wname)] = np.asarray(group[wname])
            return weights
        # Keras 3 weights: <path>/vars/<i>, the layer's name in the "vars" group's attributes.
        weights = Weights(kind=kind or "keras_weights", source=path)
        found = []

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                found.append(name)

        root.visititems(visit)
        for name in found:
            parts = name.split("/")
            if len(parts) < 2 or parts[-2] != "vars":
                continue
            weights[_h5_name(root, parts)] = np.asarray(root[name])
        if not weights and not found:
            raise DeployError("{}: holds no Keras weights; expected {}".format(path, FORMATS))
        return weights


def _h5_name(root, parts):
    """"<named scopes>/<layer name>/vars/<i>" for the dataset at "/".join(parts)."""
    names = []
    for i in range(len(parts) - 1):
        if parts[i] != "vars" and i + 1 < len(parts) and parts[i + 1] in ("vars", "layers"):
            group = "/".join(parts[:i + 1] + ["vars"])
            label = root[group].attrs.get("name") if group in root else None
            names.append(label.decode() if isinstance(label, bytes) else (label or parts[i]))
    return "/".join(names + ["vars", parts[-1]])


def _read_pb(path):
    from pipeline.graph.readers import read_model

    graph = read_model(path)
    if graph.kind != "tensorflow":
        raise DeployError("{}: not a TensorFlow graph; expected {}".format(path, FORMATS))
    import numpy as np

    weights = Weights(kind="pb", source=path)
    for node in graph.nodes.values():
        if node.op != "Const":
            continue
        tensor = node.attrs.get("value")
        value = tensor.array() if hasattr(tensor, "array") else None
        if value is None or not hasattr(value, "dtype") or value.dtype.kind not in "fc" or np.ndim(value) == 0:
            continue
        name = re.sub(r"(/Read)?/ReadVariableOp(/resource)?$|/read$", "", node.name)
        weights[name] = np.asarray(value)
    return weights


def _checkpoint_prefix(path):
    """The prefix of the checkpoint at ``path`` (a prefix, one of its files, or a directory)."""
    text = str(path)
    text = re.sub(r"\.(index|data-\d+-of-\d+)$", "", text)
    prefix = Path(text)
    if Path(text + ".index").is_file():
        return text
    if prefix.is_dir():
        from pipeline.tf import import_tf

        latest = import_tf().train.latest_checkpoint(str(prefix))
        if latest:
            return latest
        indexes = sorted(prefix.glob("*.index"))
        if len(indexes) == 1:
            return str(indexes[0])[: -len(".index")]
        if indexes:
            raise DeployError("{}: holds {} checkpoints and no 'checkpoint' file naming the latest; give one "
                              "prefix, e.g. {}".format(path, len(indexes), str(indexes[-1])[: -len(".index")]))
        raise DeployError("{}: directory holds no checkpoint (no .index file); expected {}".format(path, FORMATS))
    if prefix.is_file():
        raise DeployError("{}: unsupported file type; expected {}".format(path, FORMATS))
    raise DeployError("{}: no such file or checkpoint (no {}.index); expected {}".format(path, prefix.name, FORMATS))


def _read_checkpoint(path):
    prefix = _checkpoint_prefix(path)
    from pipeline.tf import import_tf

    tf = import_tf()
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
    except Exception as e:  # tf.errors.* for corrupt or truncated files
        raise DeployError("{}: cannot read checkpoint: {}; expected {}".format(path, first_line(e), FORMATS))
    object_based = "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes
    weights = Weights(kind="tf2" if object_based else "tf1", source=prefix)
    for key in sorted(shapes):
        if object_based:
            if not key.endswith(_TF2_SUFFIX) or _TF2_SKIP.search(key):
                continue
            name = key[: -len(_TF2_SUFFIX)]
        else:
            if key == "global_step" or key.endswith(("/Momentum", "/RMSProp", "/RMSProp_1", "/Adam", "/Adam_1")):
                continue
            name = key
        try:
            weights[name] = reader.get_tensor(key)
        except Exception as e:
            raise DeployError("{}: cannot read {} from the checkpoint: {}".format(path, key, first_line(e)))
    return weights


def strip_port(name):
    return re.sub(r":\d+$", "", name)


# -- pairing ---------------------------------------------------------------------------------------
