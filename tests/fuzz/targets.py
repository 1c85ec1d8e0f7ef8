"""Fuzz targets: deploy's readers of untrusted files must answer every input with a result or a
DeployError (one line for the user), never another exception.

    python scripts/fuzz.py readers --seconds 600     # coverage-guided, by hand (atheris)
    pytest -m fuzz                                   # the bounded CI run and the corpus replay

Each target takes the fuzzer's bytes. ``readers``: the first byte picks the file name deploy sees
(so content detection and every reader get inputs), the rest is the file. ``config``: the bytes
are a config file; its ``extends`` can only point inside the scratch folder.
"""

import os
import tempfile
from pathlib import Path

READER_NAMES = ("model.pb", "model.pbtxt", "model.meta", "model.onnx", "frozen.pb", "graph.txt")
SCRATCH = Path(tempfile.mkdtemp(prefix="deploy-fuzz-"))


def _scratch_file(name, data):
    path = SCRATCH / name
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def readers(data: bytes):
    from pipeline.errors import DeployError
    from pipeline.graph.readers import read_model

    if not data:
        return
    path = _scratch_file(READER_NAMES[data[0] % len(READER_NAMES)], data[1:])
    try:
        graph = read_model(path)
        graph.inputs, graph.outputs, len(graph.nodes)  # what every command reads first
    except DeployError as e:
        assert "\n" not in e.message.strip(), "a DeployError must be one line: {!r}".format(e.message)
    finally:
        os.unlink(path)


def config(data: bytes):
    from pipeline.config import load_config
    from pipeline.errors import DeployError

    base = SCRATCH / "base.yaml"
    if not base.exists():
        base.write_text("run:\n  name: base\n")
    path = _scratch_file("config.yaml", data)
    try:
        load_config(path, [])
    except DeployError:
        pass  # ConfigError lists problems, one line each; main() prints the first
    finally:
        os.unlink(path)


TARGETS = {"readers": readers, "config": config}
