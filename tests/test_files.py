"""pipeline.files: the garbage collector paused for a block, the one place that does it."""

import gc
import os

import pytest

from pipeline.errors import DeployError
from pipeline.files import MODEL_BYTES, RECORD_BYTES, check_regular, gc_paused, read_regular


def test_gc_paused_restores_what_it_found_even_on_an_error():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with gc_paused():
            raise ValueError("x")
    assert gc.isenabled()
    with gc_paused(pause=False):  # a stage that opts out (train)
        assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_at_exit_runs_once_in_reverse_order_and_survives_a_failure(monkeypatch):
    from pipeline import files

    monkeypatch.setattr(files, "_AT_EXIT", [])
    calls = []

    def fail():
        calls.append("fail")
        raise OSError("gone already")

    files.at_exit(calls.append, "first")
    files.at_exit(fail)
    files.at_exit(calls.append, "last")
    files.run_at_exit()
    files.run_at_exit()  # atexit's own call after entry's: nothing left
    assert calls == ["last", "fail", "first"]


def test_outlive_keeps_one_object_until_the_end(monkeypatch):
    from pipeline import files

    monkeypatch.setattr(files, "_OUTLIVE", [])
    assert not files.outlived()
    first, second = object(), object()
    files.outlive(first)
    files.outlive(second)
    assert files.outlived() and files._OUTLIVE == [second]  # a zoo check lets each model but the last go


@pytest.mark.tf
def test_the_fast_exit_still_removes_what_check_converted(tmp_path):
    """`deploy check` keeps its graph for the end and exits without teardown (os._exit): the tf2onnx
    output folder it made is removed all the same, and the output is complete."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "scripts" / "bench"))
    from graph_read import write_frozen

    model = tmp_path / "small.pb"
    write_frozen(model, 60)
    temp = tmp_path / "tmp"
    temp.mkdir()
    res = subprocess.run([sys.executable, "-m", "pipeline", "check", str(model), "--target", "jetson_tx2",
                          "--format", "json"], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=300, env=dict(os.environ, TMPDIR=str(temp), DEPLOY_CHECK_CONVERT="1"))
    assert res.returncode == 0, res.stderr.decode()
    routes = {r["route"]: r for r in json.loads(res.stdout)["routes"]}
    assert routes["onnx"]["basis"] == "converted"
    assert [p.name for p in temp.iterdir()] == []


def test_gc_paused_can_leave_the_collector_off_for_a_command_that_ends():
    assert gc.isenabled()
    try:
        with gc_paused(resume=False):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- issue 29: regular files only, each within the limit for its kind


def _special(tmp_path, kind):
    """A file that is not a regular file, named like a model: a FIFO, a link to /dev/zero, a socket, a folder."""
    import socket

    path = tmp_path / "model.pb"
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "dev_zero":
        os.symlink("/dev/zero", str(path))
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif kind == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize("kind,word", [("fifo", "a named pipe (FIFO)"), ("dev_zero", "a character device"),
                                       ("socket", "a socket"), ("directory", "a directory")])
def test_only_a_regular_file_is_read_and_the_others_are_named(tmp_path, kind, word):
    """Old: a FIFO waited forever in open(), /dev/zero read until MemoryError."""
    path = _special(tmp_path, kind)
    for call in (lambda: read_regular(path, "a model", MODEL_BYTES), lambda: check_regular(path, "a model", MODEL_BYTES)):
        with pytest.raises(DeployError) as e:
            call()
        assert e.value.message.startswith(str(path)) and word in e.value.message and "not a regular file" in e.value.message
    if kind == "dev_zero":
        assert "(a link to /dev/zero)" in str(pytest.raises(DeployError, check_regular, path, "a model").value.message)


def test_a_file_over_the_limit_for_its_kind_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "big.json"
    with open(str(path), "wb") as handle:
        handle.truncate(RECORD_BYTES + 1)  # sparse: nothing is written, and nothing may be read
    for call in (read_regular, check_regular):
        with pytest.raises(DeployError, match=r"{} bytes, more than the run record may hold".format(RECORD_BYTES + 1)):
            call(path, "the run record", RECORD_BYTES)
    small = tmp_path / "ok.json"
    small.write_bytes(b"{}")
    assert read_regular(small, "the run record", RECORD_BYTES) == b"{}"
    assert check_regular(tmp_path, "a model", MODEL_BYTES, directory_ok=True)


def test_a_missing_file_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "nothing", "a model", MODEL_BYTES)
    with pytest.raises(FileNotFoundError):
        check_regular(tmp_path / "nothing", "a model")
