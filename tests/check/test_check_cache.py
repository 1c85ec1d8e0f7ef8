"""Issue 26 item 1: a re-check of an unchanged model answers from the check cache (same bytes, target tables,
tf2onnx, opset, deploy); a changed byte, another target or a corrupt entry is a miss, never a crash."""

import json
import time

import pytest

from conftest import deploy
from pipeline.check import cache as check_cache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(check_cache.DIR_ENV, str(folder))
    monkeypatch.delenv(check_cache.OFF_ENV, raising=False)
    return folder


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    """keras.applications MobileNetV2 (weights=None, 32x32, alpha 0.35) frozen as a user freezes it."""
    from pipeline.tf import import_tf

    tf = import_tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), alpha=0.35)
    func = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec((1, 32, 32, 3), tf.float32, name="input"))
    path = tmp_path_factory.mktemp("cache") / "mobilenet_v2.pb"
    path.write_bytes(convert_variables_to_constants_v2(func).graph.as_graph_def().SerializeToString())
    return path


def _env(cache_dir, **more):
    return dict({check_cache.DIR_ENV: str(cache_dir), check_cache.OFF_ENV: "1"}, **more)


@pytest.mark.tf
@pytest.mark.slow
def test_a_recheck_answers_from_the_cache_and_a_change_misses(mobilenet, cache_dir, tmp_path, cli):
    start = time.monotonic()
    first = deploy("check", mobilenet, "--target", "jetson_tx2", env=_env(cache_dir))
    first_seconds = time.monotonic() - start
    assert first.returncode == 0, first.stderr
    assert "converted by tf2onnx" in first.stdout and "check cache" not in first.stderr
    assert len(list(cache_dir.glob("*.json"))) == 1
    start = time.monotonic()
    again = deploy("check", mobilenet, "--target", "jetson_tx2", env=_env(cache_dir))
    again_seconds = time.monotonic() - start
    assert again.returncode == 0 and again.stdout == first.stdout  # the same answer, word for word
    assert "the answer from the check cache" in again.stderr  # the recorded flag: tf2onnx did not run
    assert again_seconds < max(2.0, first_seconds / 3)  # generous: the goal (<= 0.5 s) is scripts/bench's

    # the lookup itself (hash the bytes, read and validate the entry) is well under half a second
    answers = check_cache.AnswerCache.for_check("jetson_tx2", None, "serving_default", None, predict=True)
    start = time.monotonic()
    report = answers.get(mobilenet)
    assert report is not None and report.cached and time.monotonic() - start <= 0.5
    assert report.route("onnx").basis == "converted"

    # another target, another byte, --no-cache: misses
    # (in this process: a miss runs tf2onnx in the checks' worker all the same; the subprocesses above time a hit)
    other = cli("check", mobilenet, "--target", "agx_orin", env=_env(cache_dir))
    assert "check cache" not in other.stderr and "opset 18" in other.stdout
    changed = tmp_path / "changed.pb"
    data = bytearray(mobilenet.read_bytes())
    data[-1] ^= 1  # a weight's last byte
    changed.write_bytes(bytes(data))
    assert check_cache.AnswerCache.for_check("jetson_tx2", predict=True).get(changed) is None
    fresh = cli("check", mobilenet, "--target", "jetson_tx2", "--no-cache", env=_env(cache_dir))
    assert "check cache" not in fresh.stderr and fresh.returncode == 0


def test_corrupt_foreign_or_old_entries_are_misses_never_crashes(tmp_path, cache_dir, cli):
    onnx_model = tmp_path / "yes.onnx"
    _tiny_onnx(onnx_model)
    env = _env(cache_dir, DEPLOY_CHECK_CONVERT="0")
    first = cli("check", onnx_model, "--target", "jetson_tx2", env=env)
    assert first.returncode == 0, first.stderr
    [entry] = cache_dir.glob("*.json")
    assert "check cache" in cli("check", onnx_model, "--target", "jetson_tx2", env=env).stderr
    good = entry.read_text()
    for bad in (good[: len(good) // 2], "[]", "{}", json.dumps(dict(json.loads(good), schema="deploy.check-cache/0")),
                json.dumps(dict(json.loads(good), key="0" * 64)),
                json.dumps(dict(json.loads(good), report=dict(json.loads(good)["report"], routes=[{"route": 1}])))):
        entry.write_text(bad)
        for other in cache_dir.glob("*.json"):  # only the bad entry can answer (the key is stable: same code)
            if other != entry:
                other.unlink()
        again = cli("check", onnx_model, "--target", "jetson_tx2", env=env)
        assert again.returncode == 0 and again.stdout == first.stdout, (bad[:80], again.stderr)
        assert "check cache" not in again.stderr and "Traceback" not in again.stderr
    # and it was written again, whole (a temporary file renamed into place)
    assert "check cache" in cli("check", onnx_model, "--target", "jetson_tx2", env=env).stderr
    assert not list(cache_dir.glob(".part-*"))


def test_switched_off_it_neither_reads_nor_writes(tmp_path, cache_dir, cli):
    onnx_model = tmp_path / "yes.onnx"
    _tiny_onnx(onnx_model)
    env = _env(cache_dir, DEPLOY_CHECK_CONVERT="0", DEPLOY_CHECK_CACHE="0")
    assert cli("check", onnx_model, "--target", "jetson_tx2", env=env).returncode == 0
    assert not cache_dir.exists()


def test_the_cache_folder_follows_xdg_and_the_override(monkeypatch, tmp_path):
    monkeypatch.delenv(check_cache.DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert check_cache.cache_dir() == tmp_path / "xdg" / "deploy" / "check"
    monkeypatch.setenv(check_cache.DIR_ENV, str(tmp_path / "mine"))
    assert check_cache.cache_dir() == tmp_path / "mine"


def _tiny_onnx(path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])],
                              "tiny", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def _aged(path, days, now):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    import os

    os.utime(str(path), (now - days * 86400, now - days * 86400))
    return path


def test_entries_unused_for_the_kept_days_are_pruned_at_most_once_a_day(tmp_path, monkeypatch):
    monkeypatch.delenv(check_cache.DAYS_ENV, raising=False)
    now = time.time()
    old = _aged(tmp_path / "a.json", 31, now)
    recent = _aged(tmp_path / "b.json", 28, now)
    old_estimate = _aged(tmp_path / "estimate" / "c.json", 40, now)
    recent_estimate = _aged(tmp_path / "estimate" / "d.json", 1, now)
    stale_part = _aged(tmp_path / ".part-x.json", 0.1, now)  # 2.4 h: a check killed while storing
    fresh_part = _aged(tmp_path / ".part-y.json", 0.01, now)  # 14 min: maybe being written right now
    assert check_cache.prune(tmp_path, now=now) == 3
    assert not old.exists() and not old_estimate.exists() and not stale_part.exists()
    assert recent.exists() and recent_estimate.exists() and fresh_part.exists()
    # within a day of the last pruning nothing is scanned, even an entry that has aged out since
    again = _aged(tmp_path / "e.json", 60, now)
    assert check_cache.prune(tmp_path, now=now + 3600) == 0 and again.exists()
    assert check_cache.prune(tmp_path, now=now + 86400 + 1) == 2  # a day on: that entry and the part file, now old
    assert not again.exists() and not fresh_part.exists() and recent.exists() and recent_estimate.exists()


def test_the_kept_days_come_from_the_environment(tmp_path, monkeypatch, capsys):
    now = time.time()
    entry = _aged(tmp_path / "a.json", 3, now)
    monkeypatch.setenv(check_cache.DAYS_ENV, "0")  # 0: keep everything
    assert check_cache.prune(tmp_path, now=now) == 0 and entry.exists()
    monkeypatch.setenv(check_cache.DAYS_ENV, "2")
    assert check_cache.prune(tmp_path, now=now) == 1 and not entry.exists()
    monkeypatch.setenv(check_cache.DAYS_ENV, "a month")
    assert check_cache.keep_days() == check_cache.KEEP_DAYS
    assert "DEPLOY_CHECK_CACHE_DAYS='a month' is not a number of days" in capsys.readouterr().err


def test_a_hit_keeps_its_entry_from_being_pruned(tmp_path, cache_dir):
    """A stored answer read back 40 days later is touched by the hit, so the next pruning keeps it."""
    from pipeline.check.findings import CheckReport

    model = tmp_path / "m.pb"
    model.write_bytes(b"not really a graph, but bytes to key on")
    answers = check_cache.AnswerCache(cache_dir, {"k": 1})
    report = CheckReport(routes=[], findings=[], model={"path": str(model)}, target={"name": "t"})
    assert answers.put(model, report)
    entry = cache_dir / (answers.key(model) + ".json")
    import os

    os.utime(str(entry), (time.time() - 40 * 86400,) * 2)
    assert answers.get(model) is not None
    assert check_cache.prune(cache_dir, now=time.time() + 2 * 86400) == 0 and entry.exists()
