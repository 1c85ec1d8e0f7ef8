"""read_model(path) -> Graph: a frozen GraphDef, a SavedModel, a TF1 meta graph, ONNX or Keras.

Dispatch by name and content: TensorFlow's formats in ``tf_reader``, ONNX in ``onnx_reader``,
Keras in ``keras_reader``, the parsing they share in ``parsing``. Only ``.keras`` / ``.h5``
import TensorFlow; every other format is read with deploy's own copy of TensorFlow's protobuf
messages (``pipeline.graph.proto``) or the ``onnx`` package.

SavedModels and meta graphs with a signature are viewed from the signature: only the nodes the
signature's outputs need, through data and control inputs and into the functions those nodes
call (see ``pipeline.graph.inline``). Frozen graphs are viewed whole.
"""

from pathlib import Path

from pipeline.errors import DeployError
from pipeline.files import KERAS_BYTES, MODEL_BYTES, check_regular, gc_paused
from pipeline.graph.parsing import sniff_protobuf
from pipeline.graph.tf_reader import read_meta, read_pb, read_pbtxt, read_saved_model

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
SUPPORTED = ("a frozen GraphDef (.pb, .pbtxt), a SavedModel directory, a TF1 meta graph (.meta), "
             "an ONNX model (.onnx) or a Keras model (.keras, .h5)")


def read_model(path, signature="serving_default"):
    """Read the model at ``path`` into a Graph (see pipeline.graph.view); DeployError for bad input.

    ``signature`` picks the SavedModel (or meta graph) signature to view (None: serving_default).
    """
    # Building a view creates a few objects per node and none of them form cycles: with the cyclic
    # garbage collector on, its repeated full passes over them make big graphs several times slower.
    with gc_paused():
        return _read_model(Path(path), signature or "serving_default")


def _read_model(path, signature):
    if not path.exists():
        raise DeployError("{}: no such file or directory; expected {}".format(path, SUPPORTED))
    # a named pipe, a device or a socket (or a link to one) is refused by name before anything opens it: a FIFO
    # waited forever, a link to /dev/zero read until MemoryError
    check_regular(path, "a model", KERAS_BYTES if path.suffix.lower() in KERAS_SUFFIXES else MODEL_BYTES,
                  directory_ok=True)
    if path.is_dir():
        if (path / "saved_model.pb").exists() or (path / "saved_model.pbtxt").exists():
            return read_saved_model(path, signature)
        raise DeployError("{}: directory is not a SavedModel (no saved_model.pb in it); pass the SavedModel "
                          "directory, or a model file: {}".format(path, SUPPORTED))
    suffix = path.suffix.lower()
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return read_saved_model(path.parent, signature)
    if suffix in (".pb", ".pbtxt", ".meta", ".onnx", ".txt", ".graphdef"):
        # protobuf files are told apart by content, so a text GraphDef saved as .pb, an ONNX model
        # named .pb or a binary graph named .pbtxt is read as what it is; a file that is none of
        # them gets the error of the format its name says
        kind = sniff_protobuf(path, expected="onnx" if suffix == ".onnx" else "text" if suffix in (".pbtxt", ".txt")
                              else "binary")
        if kind == "text":
            return read_pbtxt(path, signature)
        if kind == "onnx":
            from pipeline.graph.onnx_reader import read_onnx

            return read_onnx(path)
        return read_meta(path, signature) if suffix == ".meta" else read_pb(path, signature)
    if suffix in KERAS_SUFFIXES:
        from pipeline.graph.keras_reader import read_keras

        return read_keras(path)
    raise DeployError("{}: unsupported model file extension {!r}; expected {}".format(
        path, suffix or "(none)", SUPPORTED))
