"""Broken and hostile model files, for every command that reads one: a non-zero exit code and one
line, `deploy: error: ...`, never a traceback and never an output file.

Each file is built here: empty, random bytes, truncated, not UTF-8, a zip that is no Keras
model, a directory under a file's name, a missing file. (One format under another's name is read
by content: tests/graph/test_sniff.py.) The commands run in-process through
``pipeline.cli.main`` (an exception escaping it fails the test, as a traceback would fail a user).
"""

import os
import zipfile

import numpy as np
import pytest

from pipeline.cli import main

pytestmark = pytest.mark.tf


def _graph_def_bytes():
    from google.protobuf import text_format

    from pipeline.graph import proto

    text = ('node { name: "input" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
            'attr { key: "shape" value { shape { dim { size: -1 } dim { size: 8 } dim { size: 8 } dim { size: 3 } } } } } '
            'node { name: "output" op: "Relu" input: "input" attr { key: "T" value { type: DT_FLOAT } } }')
    return text_format.Parse(text, proto.GraphDef()).SerializeToString()


def _onnx_bytes():
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _random(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def _zip_with(path, members):
    with zipfile.ZipFile(str(path), "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def build(kind, folder):
    """Write the hostile file ``kind`` under ``folder``; returns its path."""
    pb, onnx_model = _graph_def_bytes(), _onnx_bytes()
    files = {
        "empty.pb": b"",
        "random.pb": _random(4096, 1),
        "truncated.pb": pb[: len(pb) // 2],
        "empty.pbtxt": b"",
        "random.pbtxt": _random(512, 2),
        "not_utf8.pbtxt": b"node { name: \"\xff\xfe\" op: \"Relu\" }",
        "empty.onnx": b"",
        "random.onnx": _random(4096, 3),
        "truncated.onnx": onnx_model[: len(onnx_model) // 2],
        "random.meta": _random(1024, 4),
        "random.h5": _random(2048, 5),
        "empty.keras": b"",
    }
    path = folder / kind
    if kind in files:
        path.write_bytes(files[kind])
    elif kind == "random_zip.keras":
        _zip_with(path, {"junk.txt": "hello"})
    elif kind == "bad_config.keras":
        _zip_with(path, {"config.json": "{not json", "metadata.json": "{}", "model.weights.h5": b""})
    elif kind == "directory.pb":
        path.mkdir()
    elif kind == "saved_model_random":
        path.mkdir()
        (path / "saved_model.pb").write_bytes(_random(2048, 6))
    elif kind == "missing.pb":
        pass
    elif kind == "fifo.pb":  # issue 29: a named pipe waited forever in open()
        os.mkfifo(str(path))
    elif kind == "dev_zero.pb":  # issue 29: a link to /dev/zero read until MemoryError
        os.symlink("/dev/zero", str(path))
    elif kind == "saved_model_fifo":  # a SavedModel folder whose saved_model.pb is a named pipe
        path.mkdir()
        os.mkfifo(str(path / "saved_model.pb"))
    else:
        raise AssertionError(kind)
    return path


KINDS = ["empty.pb", "random.pb", "truncated.pb", "empty.pbtxt", "random.pbtxt", "not_utf8.pbtxt",
         "empty.onnx", "random.onnx", "truncated.onnx", "random.meta", "random.h5",
         "empty.keras", "random_zip.keras", "bad_config.keras", "directory.pb", "saved_model_random", "missing.pb",
         "fifo.pb", "dev_zero.pb", "saved_model_fifo"]

COMMANDS = {
    "check": lambda m, out: ["check", m, "--target", "jetson_tx2"],
    "rewrite": lambda m, out: ["rewrite", m, "--target", "jetson_tx2", "-o", out / "out.pb", "--auto"],
    "consistency": lambda m, out: ["consistency", m, "--samples", "1"],
    "diff": lambda m, out: ["diff", m, m],
    "unfreeze": lambda m, out: ["unfreeze", m, "-o", out / "unfrozen"],
    "ckpt_inspect": lambda m, out: ["ckpt", "inspect", m],
}


NOT_FILES = ("fifo.pb", "dev_zero.pb", "saved_model_fifo")  # issue 29: refused by name, at once
# a reader outside pipeline/graph that opens the model before read_model does waits on pipeline.files' rule
# (files.read_regular); strict: the mark goes with the fix. /dev/zero there is read until memory runs out: not run.
WAITING = {}  # (command, kind) -> why it still hangs: none now
NOT_RUN = {}  # (command, kind) -> why it is not run: none now


def _case(kind, command):
    marks = [pytest.mark.xfail(reason=WAITING[command, kind], strict=True)] if (command, kind) in WAITING else []
    marks += [pytest.mark.skip(reason=NOT_RUN[command, kind])] if (command, kind) in NOT_RUN else []
    return pytest.param(kind, command, marks=marks)


class _Hung(Exception):
    pass


def _hung(signum, frame):
    raise _Hung("still reading after 20 s: a named pipe or a device was opened")


@pytest.mark.parametrize("kind, command", [_case(k, c) for k in KINDS for c in sorted(COMMANDS)])
def test_bad_model_file(kind, command, tmp_path, capsys):
    import signal

    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    model = build(kind, inputs)
    if kind in NOT_FILES:  # a FIFO blocks open() for good: the alarm ends the wait (PEP 475 lets it raise)
        previous = signal.signal(signal.SIGALRM, _hung)
        signal.alarm(20)
    try:
        code = main([str(a) for a in COMMANDS[command](model, out)])
    finally:
        if kind in NOT_FILES:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    err = capsys.readouterr().err
    assert code not in (0, None), "{} {} succeeded".format(command, kind)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("deploy: error: "), err
    assert len([line for line in lines if line.startswith("deploy: error: ")]) == 1 and "Traceback" not in err, err
    assert os.listdir(str(out)) == [], "a half-written output: {}".format(os.listdir(str(out)))


def test_saved_model_with_truncated_variables(tmp_path, capsys):
    """model.source: a SavedModel whose variables file was cut short (a broken copy or download)."""
    import tensorflow as tf

    module = tf.Module()
    module.w = tf.Variable(tf.ones([3, 2]))
    module.serve = tf.function(lambda x: {"output": tf.matmul(x, module.w)},
                               input_signature=[tf.TensorSpec([None, 3], tf.float32, name="input")])
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"serving_default": module.serve})
    data = tmp_path / "sm" / "variables" / "variables.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:10])
    config = tmp_path / "c.yaml"
    config.write_text("run: {{name: t, dir: {}}}\ntarget: jetson_tx2\nmodel: {{source: {}}}\nstages: {{freeze: }}\n".format(
        tmp_path / "runs", tmp_path / "sm"))
    code = main(["run", str(config), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.strip().splitlines()[-1] == ("deploy: error: stage freeze: {}: cannot load SavedModel: its variables are "
                                            "truncated or corrupt (Read less bytes than requested); export it again".format(
                                                tmp_path / "sm"))
    assert not (tmp_path / "runs" / "t" / "freeze" / "frozen.pb").exists()


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"inputs": "x", "outputs": []}',
                                     '{"inputs": [{"tensor": "input:0"}], "outputs": [{"name": "output"}]}',
                                     '{"model": "someone else\'s metadata"}'])
@pytest.mark.parametrize("command", ["rewrite", "consistency", "unfreeze"])
def test_foreign_or_malformed_io_json_beside_a_model(content, command, tmp_path, capsys):
    """io.json beside frozen.pb is read as the graph's inputs and outputs: one that is not deploy's
    is a one-line error naming it, never a KeyError."""
    model = tmp_path / "frozen.pb"
    model.write_bytes(_graph_def_bytes())
    (tmp_path / "io.json").write_text(content)
    out = tmp_path / "out"
    out.mkdir()
    code = main([str(a) for a in COMMANDS[command](model, out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1].startswith("deploy: error: {}: not deploy's io.json (".format(tmp_path / "io.json")), err
    assert os.listdir(str(out)) == []


def test_truncated_keras_file_is_named_for_what_it_is(tmp_path, capsys):
    """A .keras file cut short (a broken download): not "File not found" for a file that exists."""
    import keras

    inp = keras.Input((4,))
    keras.Model(inp, keras.layers.Dense(2)(inp)).save(str(tmp_path / "good.keras"))
    data = (tmp_path / "good.keras").read_bytes()
    (tmp_path / "cut.keras").write_bytes(data[: len(data) // 2])
    for argv in (["check", tmp_path / "cut.keras", "--target", "jetson_tx2"], ["ckpt", "inspect", tmp_path / "cut.keras"]):
        code = main([str(a) for a in argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and err[-1].startswith("deploy: error: {}: not a .keras file: not a zip archive, so "
                                                "truncated or another format".format(tmp_path / "cut.keras")), err


def test_rewrite_output_problems_are_found_before_any_pass_runs(tmp_path, capsys):
    model = tmp_path / "frozen.pb"
    model.write_bytes(_graph_def_bytes())
    (tmp_path / "taken.pb").mkdir()
    for out, message in ((tmp_path / "taken.pb", "is a directory; give a file name (*.pb)"),
                         (tmp_path / "graph.txt", "the rewritten model is a frozen .pb; name it *.pb"),
                         (tmp_path / "missing" / "o.pb", "directory {} does not exist".format(tmp_path / "missing"))):
        code = main(["rewrite", str(model), "-t", "jetson_tx2", "-o", str(out), "--pass", "prune"])
        captured = capsys.readouterr()
        assert code == 1 and captured.err.strip().splitlines() == ["deploy: error: -o {}: {}".format(out, message)]
        assert "prune" not in captured.err  # nothing ran


def test_rewrite_of_a_readable_model_that_is_not_a_frozen_graph_is_one_line(tmp_path, capsys):
    """A good .keras (or a SavedModel) given to rewrite: it is read (check takes it), but it is not a
    GraphDef; it was parsed as one and crashed with protobuf's DecodeError."""
    import keras

    inp = keras.Input((4,))
    keras.Model(inp, keras.layers.Dense(2)(inp)).save(str(tmp_path / "my.keras"))
    out = tmp_path / "out"
    out.mkdir()
    code = main(["rewrite", str(tmp_path / "my.keras"), "-t", "jetson_tx2", "-o", str(out / "out.pb"), "--auto"])
    err = capsys.readouterr().err.strip().splitlines()
    # after rewrite's progress line ("reading"), one error line
    assert code == 1 and len(err) <= 2 and all(line.startswith("rewrite ") for line in err[:-1]), err
    assert err[-1].startswith("deploy: error: {}: is a Keras model; deploy rewrite takes a frozen graph".format(
        tmp_path / "my.keras")), err
    assert "--until freeze" in err[-1]
    assert os.listdir(str(out)) == []


# --- issue 29: a named pipe or a device named like a model, alone or in a zoo folder, through the real CLI


def _not_a_file(folder, kind, name="model.pb"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if kind == "fifo":
        os.mkfifo(str(path))
    else:
        os.symlink("/dev/zero", str(path))
    return path


def _check(*args):
    import subprocess

    from conftest import deploy

    try:
        return deploy("check", *args, "--target", "jetson_tx2", "--no-convert", timeout=20)
    except subprocess.TimeoutExpired:  # the answer takes about 2 s
        raise AssertionError("deploy check {} still ran after 20 s".format(" ".join(map(str, args)))) from None


@pytest.mark.slow
@pytest.mark.parametrize("kind,word", [("fifo", "a named pipe (FIFO)"), ("dev_zero", "a character device")])
def test_a_zoo_member_that_is_not_a_regular_file_is_refused_by_name(tmp_path, kind, word):
    """Old: a FIFO model.pb in a zoo folder waited forever; a model.pb linked to /dev/zero ended in MemoryError."""
    zoo = tmp_path / "zoo"
    bad = _not_a_file(zoo / "sub", kind)
    (zoo / "good.pb").write_bytes(_graph_def_bytes())
    res = _check(zoo)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "{}{}: {}, not a regular file".format(bad, " (a link to /dev/zero)" if kind == "dev_zero" else "", word) \
        in res.stdout, res.stdout
    assert "good.pb" in res.stdout and "YES" in res.stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_deploy_check_of_one_model_that_is_not_a_regular_file_is_one_line(tmp_path, kind):
    res = _check(_not_a_file(tmp_path, kind))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    (line,) = res.stderr.strip().splitlines()[-1:]
    assert line.startswith("deploy: error: ") and "not a regular file" in line, res.stderr
