"""pipeline.files: the garbage collector paused for a block, the one place that does it."""

import gc

import pytest

from pipeline.files import gc_paused


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
