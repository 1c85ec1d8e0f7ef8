"""Backends: one session shape for every way deploy runs a model.

    session = open_session("frozen.pb")    # TensorFlow: a frozen GraphDef, screened before it runs
    session = open_session("model.onnx")   # ONNX Runtime, CPU provider unless told otherwise
    session.name          # "tensorflow" | "onnxruntime" (on a Jetson: "tensorrt")
    session.inputs        # [(name, shape, dtype)], shape a tuple of int or None (dynamic dim), dtype "float32"
    session.outputs       # the same, for the outputs
    session.output_names  # [name of each output], in ``outputs`` order
    session.run(feed)     # {input name: array} -> [np.ndarray per output], in ``outputs`` order
    session.label         # where it runs: {"runtime", "version", ...}

Every caller that runs a model goes through a session: the convert stage's comparison, rewrite's
per-pass checks (TensorFlow and ONNX), batch consistency, the benchmark. Backends import their
runtime library inside functions only. A new backend (TensorRT on the board, the device agent)
is a module here with a class of the same members; ``numeric.consistency`` and the benchmark
take any of them.
"""

from pathlib import Path
from typing import List, Protocol, Sequence, Tuple

from pipeline.errors import DeployError

TENSORFLOW_SUFFIXES = (".pb", ".pbtxt")
ONNX_SUFFIXES = (".onnx",)


class Session(Protocol):
    name: str
    inputs: List[Tuple[str, tuple, str]]
    outputs: List[Tuple[str, tuple, str]]
    output_names: List[str]
    label: dict

    def run(self, feed: dict) -> Sequence: ...


def open_session(path, io=None, providers=None) -> Session:
    """A session for the model file at ``path``: a frozen .pb/.pbtxt runs in TensorFlow (``io``
    names its inputs and outputs, else pipeline.graph.io decides), an .onnx in ONNX Runtime."""
    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file() or suffix not in TENSORFLOW_SUFFIXES + ONNX_SUFFIXES:
        raise DeployError("{} {}; expected a frozen .pb/.pbtxt (TensorFlow) or an .onnx model{}".format(
            path, "is a directory" if path.is_dir() else "is not a model file" if path.exists() else "does not exist",
            " (freeze a SavedModel first: deploy run --until freeze)" if path.is_dir() else ""))
    if suffix in ONNX_SUFFIXES:
        return load_onnx(path, providers)
    from pipeline.backends.tensorflow import load

    return load(path, io)


def load_onnx(path, providers=None):
    """An ONNX Runtime session for the ``.onnx`` file at ``path``; ``DeployError`` if it can't load.

    ``providers`` is a list of ONNX Runtime execution provider names, in preference order;
    ``None`` means ``["CPUExecutionProvider"]`` (explicit, so numbers never silently move to a GPU).
    """
    from pipeline.backends.onnxruntime import load

    return load(path, providers=providers)
