"""Issue 29 item 4 (first clause) and issue 26 items 1 and 6: the converter's worker dies with deploy,
whatever kills deploy (kill -9 included); its temporary folder is removed by the next check; tf2onnx is
asked through its public API (no run-time patching) with settings that keep its memory down."""

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.check import pool

ROOT = Path(__file__).resolve().parents[2]


def _children(pid):
    """Process ids whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(entry)) as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _alive(pid):
    try:
        with open("/proc/{}/stat".format(pid)) as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid):
    try:
        with open("/proc/{}/cmdline".format(pid), "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_kill_9_of_deploy_takes_its_worker_and_the_next_check_removes_its_folder(tmp_path):
    """A parent holding a worker (as deploy check does while tf2onnx runs) is killed with SIGKILL: the worker
    goes too, and the folder it left is removed by the next deploy's workdir()."""
    code = ("import sys, time\n"
            "from pipeline.check import convert_probe\n"
            "worker = convert_probe._shared_worker(False)\n"
            "print(convert_probe.workdir(), worker.proc.pid, flush=True)\n"
            "time.sleep(600)\n")
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=str(ROOT), stdout=subprocess.PIPE, env=env)
    try:
        folder, worker = parent.stdout.readline().decode().split()
        worker = int(worker)
        assert _alive(worker) and "pipeline.check.worker" in _cmdline(worker)
        time.sleep(0.5)  # the worker has set PR_SET_PDEATHSIG (its first act) well before its imports end
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the worker outlived a kill -9 of its deploy"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert Path(folder).is_dir() and Path(folder).parent == tmp_path  # left behind by the killed deploy
    live = tmp_path / (pool.TMP_PREFIX + "live")  # a running deploy's folder: its lock is held
    live.mkdir()
    import fcntl

    fd = os.open(str(live / pool.LOCK_NAME), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        out = subprocess.run([sys.executable, "-c", "from pipeline.check import pool; print(pool.workdir())"],
                             cwd=str(ROOT), env=env, stdout=subprocess.PIPE, check=True, timeout=60)
    finally:
        os.close(fd)
    assert not Path(folder).exists()  # swept
    assert live.is_dir()  # never a live deploy's
    assert not Path(out.stdout.decode().strip()).exists()  # and the new one removed at its exit


def test_a_folder_without_a_lock_is_left_until_it_is_old(tmp_path):
    young = tmp_path / (pool.TMP_PREFIX + "young")
    young.mkdir()
    old = tmp_path / (pool.TMP_PREFIX + "old")
    old.mkdir()
    os.utime(str(old), (time.time() - 2 * 86400, time.time() - 2 * 86400))
    link = tmp_path / (pool.TMP_PREFIX + "link")
    link.symlink_to(old)
    assert pool.sweep(str(tmp_path)) == [str(old)]
    assert young.is_dir() and not old.exists()


def test_tf2onnx_is_not_patched_at_run_time():
    """No assignment to anything of tf2onnx in the converter's code (the old probe replaced
    tf2onnx.convert.from_graph_def during a conversion to keep the model)."""
    for name in ("convert_probe.py", "worker.py", "pool.py"):
        tree = ast.parse((ROOT / "pipeline" / "check" / name).read_text())
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                text = ast.unparse(target)
                assert not text.startswith("tf2onnx."), "{}: {} is assigned".format(name, text)
        calls = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
        assert not any(c in ("setattr", "monkeypatch.setattr") and "tf2onnx" in c for c in calls)


@pytest.mark.tf
@pytest.mark.slow
def test_the_worker_converts_with_tf2onnx_settings_that_keep_memory_down(tmp_path):
    """tf2onnx's catch-errors deep copies are off in the worker (TF2ONNX_CATCH_ERRORS=FALSE) and a graph
    that fails with them off is converted again with tf2onnx's default: the same answer as the convert stage."""
    from pipeline.check import convert_probe
    from pipeline.check.worker import Worker

    sys.path.insert(0, str(ROOT / "tests" / "check"))
    import field_graphs

    graph = field_graphs.keras_flatten_tf1(tmp_path / "flatten.pb")
    worker = Worker(convert_probe.workdir())
    try:
        answer = worker.ask({"do": "convert", "path": str(graph), "opset": 13, "out": str(tmp_path / "f.onnx")}, 300)
        assert answer["status"] == "converted" and (tmp_path / "f.onnx").is_file()
        with open("/proc/{}/environ".format(worker.proc.pid), "rb") as environ:
            assert b"TF2ONNX_CATCH_ERRORS=FALSE" in environ.read().split(b"\0")
        again = worker.ask({"do": "convert", "path": str(tmp_path / "missing.pb"), "opset": 13,
                            "out": str(tmp_path / "g.onnx")}, 300)
        assert again["status"] in ("refused", "error") and worker.alive  # one bad request, the worker goes on
    finally:
        worker.close()


@pytest.mark.tf
@pytest.mark.slow
def test_a_zoo_converts_on_every_core_with_one_tensorflow_import_per_worker(tmp_path, monkeypatch):
    """Three frozen graphs on two CPUs: two workers (two TensorFlow imports), not three; every graph converted
    (this replaces tests/check/test_convert_options.py's one-subprocess test)."""
    from pipeline.check import background, check_model, convert_probe, worker, zoo
    from pipeline.targets import load_target

    sys.path.insert(0, str(ROOT / "tests" / "check"))
    import field_graphs

    paths = [field_graphs.keras_flatten_tf1(tmp_path / "a.pb"), field_graphs.keras_flatten_tf2(tmp_path / "b.pb"),
             field_graphs.tf115_dropout(tmp_path / "c.pb", placeholder_rate=True)]
    started = []

    class Counted(worker.Worker):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.proc.pid)

    monkeypatch.setattr(worker, "Worker", Counted)
    monkeypatch.setattr(background, "usable_cpus", lambda: 2)
    monkeypatch.delenv("DEPLOY_CHECK_CONVERT", raising=False)
    entries = zoo.check_models([str(p) for p in paths], load_target("jetson_tx2"))
    assert len(started) == 2
    assert [e.report.route("onnx").basis for e in entries] == ["converted"] * 3
    assert all(not _alive(pid) for pid in started)  # closed when their work ended
    again = check_model(paths[0], load_target("jetson_tx2"))  # in the per-process cache: no new worker
    assert len(started) == 2 and again.route("onnx").basis == "converted"
    assert convert_probe.transient(paths[0], 13) is False
