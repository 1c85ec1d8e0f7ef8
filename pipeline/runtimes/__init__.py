"""Runtimes: load a model and run it, behind one small interface the benchmark uses.

    session = load_onnx("model.onnx")          # ONNX Runtime, CPU provider unless told otherwise
    session.inputs   # [(name, shape, dtype)], shape a tuple of int (fixed) or None (dynamic)
    session.outputs  # same, for the outputs
    session.run({"x": array})                  # -> list of numpy arrays, in ``outputs`` order
    session.provider # e.g. "CPUExecutionProvider"
    session.label    # where it runs: {"runtime", "version", "provider", "providers", "host": {...}}

A TensorRT backend (on a Jetson) will return an object with the same attributes. Backends import
their runtime library inside functions only.
"""


def load_onnx(path, providers=None):
    """An ONNX Runtime session for the ``.onnx`` file at ``path``; ``DeployError`` if it can't load.

    ``providers`` is a list of ONNX Runtime execution provider names, in preference order;
    ``None`` means ``["CPUExecutionProvider"]`` (explicit, so numbers never silently move to a GPU).
    """
    from pipeline.runtimes.onnxruntime import load

    return load(path, providers=providers)
