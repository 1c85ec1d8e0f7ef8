"""The check's work beside the routes (pipeline.check.background) and the one-pass shortcuts of a big
graph (issue 20, point 6): the same answers with and without a child process, with and without
the file in topological order."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from pipeline.check import background
from pipeline.check.compute import conv_flops, tftrt_share
from pipeline.graph import read_model
from pipeline.graph.analysis import _fold_from_constants, constant_subgraph

sys.path.insert(0, str(ROOT / "scripts" / "bench"))

from graph_read import write_frozen  # noqa: E402


# where the check forks: os.fork and two CPUs (the machine's side of background.worth_forking)
forks = pytest.mark.skipif(not hasattr(os, "fork") or background.usable_cpus() < 2,
                           reason="forks only with os.fork and two CPUs")


def _in_fresh_python(code):
    """Run ``code`` in a fresh interpreter (no TensorFlow, no threads: where the check forks)."""
    res = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout.decode().strip().splitlines()[-1])


@forks
def test_big_work_runs_in_a_child_and_comes_back_the_same():
    out = _in_fresh_python(
        "import json, os\n"
        "from pipeline.check import background\n"
        "me = os.getpid()\n"
        "pending = background.start(lambda x: {'pid': os.getpid(), 'x': x}, [1, 'a'], nodes=10 ** 6)\n"
        "kind = type(pending).__name__\n"
        "value = pending.result(); pending.close()\n"
        "small = background.start(lambda: os.getpid(), nodes=10).result()\n"
        "print(json.dumps({'me': me, 'value': value, 'kind': kind, 'small': small}))\n")
    assert out["kind"] == "_Child" and out["value"]["pid"] != out["me"] and out["value"]["x"] == [1, "a"]
    assert out["small"] == out["me"]  # a small graph: computed in place


def test_no_fork_when_switched_off_or_tensorflow_or_threads_are_there(monkeypatch):
    monkeypatch.setenv(background.ENV, "0")
    assert not background.worth_forking(10 ** 6)
    monkeypatch.delenv(background.ENV)
    monkeypatch.setitem(sys.modules, "tensorflow", object())
    assert not background.worth_forking(10 ** 6)
    monkeypatch.delitem(sys.modules, "tensorflow")
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not background.worth_forking(10 ** 6)
    finally:
        stop.set()
        thread.join()


@forks
def test_a_failing_child_is_computed_again_here_and_its_error_raised_here():
    out = _in_fresh_python(
        "import json, os\n"
        "from pipeline.check import background\n"
        "me = os.getpid()\n"
        "def work():\n"
        "    if os.getpid() != me:\n"
        "        os._exit(7)  # the child dies without an answer\n"
        "    return 'here'\n"
        "answer = background.start(work, nodes=10 ** 6).result()\n"
        "def bad():\n"
        "    raise ValueError('node x: no such input')\n"
        "try:\n"
        "    background.start(bad, nodes=10 ** 6).result()\n"
        "    error = None\n"
        "except ValueError as e:\n"
        "    error = str(e)\n"
        "print(json.dumps({'answer': answer, 'error': error}))\n")
    assert out == {"answer": "here", "error": "node x: no such input"}


@forks
def test_close_without_a_result_leaves_no_child_behind():
    out = _in_fresh_python(
        "import json, os, time\n"
        "from pipeline.check import background\n"
        "pending = background.start(time.sleep, 60, nodes=10 ** 6)\n"
        "pid = pending.pid\n"
        "began = time.time(); pending.close(); took = time.time() - began\n"
        "try:\n"
        "    os.waitpid(pid, os.WNOHANG); left = True\n"
        "except ChildProcessError:\n"
        "    left = False\n"
        "print(json.dumps({'took': took, 'left': left}))\n")
    assert out["left"] is False and out["took"] < 10


def test_deploy_check_says_the_same_with_and_without_the_child(tmp_path):
    """A graph big enough to fork: the JSON report is byte for byte the same either way."""
    path = tmp_path / "g.pb"
    write_frozen(path, background.MIN_NODES + 5000)
    outs = []
    for fork in ("1", "0"):
        res = subprocess.run([sys.executable, "-m", "pipeline", "check", str(path), "--target", "jetson_tx2",
                              "--format", "json"], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=300, env=dict(os.environ, DEPLOY_CHECK_FORK=fork, DEPLOY_CHECK_CONVERT="0"))
        assert res.returncode == 0, res.stderr.decode()
        outs.append(res.stdout)
    assert outs[0] == outs[1]
    routes = {r["route"]: r for r in json.loads(outs[0])["routes"]}
    assert routes["tftrt"]["share"]["flops"] > 0


def _reversed(graph):
    """The same graph with its nodes in reverse file order: every edge a forward reference."""
    graph.nodes = dict(reversed(list(graph.nodes.items())))
    graph.invalidate()
    return graph


def test_one_pass_shortcuts_fall_back_on_a_file_out_of_order(tmp_path):
    path = tmp_path / "g.pb"
    write_frozen(path, 2000)
    ordered, backwards = read_model(path), _reversed(read_model(path))
    assert conv_flops(ordered) == conv_flops(backwards)
    assert tftrt_share(ordered, lambda op: True) == tftrt_share(backwards, lambda op: True)
    assert conv_flops(ordered)[0] and not conv_flops(ordered)[1]


def test_constant_folding_in_one_pass_and_from_the_constants_agree(tmp_path):
    """Const -> Mul(Const, Const) -> Add(., input): the Mul folds, the Add does not; the same answer from
    the one-pass shortcut, from the general way, and on the file reversed (where the shortcut gives up)."""
    from pipeline.graph import proto

    gd = proto.GraphDef()
    gd.node.add(name="input", op="Placeholder")
    gd.node.add(name="a", op="Const")
    gd.node.add(name="b", op="Const")
    gd.node.add(name="scale", op="Mul", input=["a", "b"])
    gd.node.add(name="noise", op="RandomUniform", input=["a"])
    gd.node.add(name="shift", op="Add", input=["scale", "input"])
    gd.node.add(name="twice", op="Mul", input=["scale:0", "b"])
    path = tmp_path / "c.pb"
    path.write_bytes(gd.SerializeToString())
    graph = read_model(path)
    const = {n.name for n in graph.nodes.values() if n.op == "Const"}
    assert constant_subgraph(graph) == {"scale", "twice"} == _fold_from_constants(graph, set(const))
    assert constant_subgraph(_reversed(read_model(path))) == {"scale", "twice"}
    assert constant_subgraph(read_model(path), frozen={"input"}) == {"scale", "twice", "shift"}


def test_constant_folding_that_gives_up_half_way_forgets_what_it_folded_so_far(tmp_path):
    """A node folded before the one-pass shortcut meets a forward reference is still reported (the general
    way starts from the constants alone: it once started from the shortcut's half-filled set and lost it)."""
    from pipeline.graph import proto

    gd = proto.GraphDef()
    gd.node.add(name="a", op="Const")
    gd.node.add(name="early", op="Neg", input=["a"])  # folded by the shortcut before it gives up
    gd.node.add(name="uses_later", op="Add", input=["later", "a"])  # a forward reference: the shortcut gives up
    gd.node.add(name="later", op="Neg", input=["a"])
    path = tmp_path / "f.pb"
    path.write_bytes(gd.SerializeToString())
    assert constant_subgraph(read_model(path)) == {"early", "uses_later", "later"}


def test_a_second_reading_needs_the_memory_for_it(tmp_path, monkeypatch):
    from pipeline.check.checker import start_file_flops

    assert background.memory_allows(1 << 60) is False  # an exabyte: nowhere (and unknown memory is no memory)
    big = tmp_path / "big.pb"
    big.write_bytes(b"\0" * 16)
    monkeypatch.setattr(background, "EARLY_BYTES", 8)
    monkeypatch.setattr(background, "memory_allows", lambda nbytes: False)
    assert start_file_flops(big) is None  # no room for a second copy: read once
    monkeypatch.setattr(background, "memory_allows", lambda nbytes: True)
    monkeypatch.setenv(background.ENV, "0")
    assert start_file_flops(big) is None  # no child: never read twice in one process
    assert start_file_flops(tmp_path / "model.onnx") is None


@forks
def test_a_child_that_cannot_read_the_file_gives_way_to_the_checks_own_reading(tmp_path):
    """A broken big .pb: the child's second reading fails, answers nothing, and is never repeated in the
    parent; the user gets the reader's one-line error, once, from the parent's own reading."""
    big = tmp_path / "broken.pb"
    big.write_bytes(b"\x0a\xff\xff" * (1 << 20))
    out = _in_fresh_python(
        "import json\n"
        "from pipeline.check import background\n"
        "from pipeline.check.checker import start_file_flops\n"
        "background.EARLY_BYTES = 1\n"
        "pending = start_file_flops({!r})\n"
        "print(json.dumps({{'kind': type(pending).__name__, 'value': pending.result()}}))\n".format(str(big)))
    assert out == {"kind": "_Child", "value": None}
    res = subprocess.run([sys.executable, "-m", "pipeline", "check", str(big), "--target", "jetson_tx2"],
                         cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    lines = res.stderr.decode().strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and "not a TensorFlow GraphDef" in lines[0], lines
