"""Fuzz targets: deploy's readers of untrusted files must answer every input with a result or a
DeployError (one line for the user), never another exception.

    python scripts/fuzz.py readers --seconds 600     # coverage-guided, by hand (atheris)
    pytest -m fuzz                                   # the bounded CI run and the corpus replay

Each target takes the fuzzer's bytes. ``readers``: the first byte picks the file name deploy sees
(so content detection and every reader get inputs), the rest is the file. ``config``: the bytes
are a config file; its ``extends`` can only point inside the scratch folder. ``runs``: one file of
a complete run folder replaced or one key of it set (``deploy report`` and ``deploy compare`` on it,
through the CLI: exit 0, 1 with one ``deploy: error:`` line, or 4 for a failed gate; never a
traceback). ``agent``: the bytes are the agent's answer line as the host reads it. ``records``: the first
line names a record kind (run, manifest, benchmark, ...), the rest is the file: pipeline.records must
refuse it in one line or take it, and what it takes must be writable again and computable (every number a
reader sees converts to a float; latencies and ratios of them stay finite). ``bundle``: the bytes are a
checkpoint's ``variables.index`` (beside a data shard of 4 KiB), the tensor bundle deploy diff reads a SavedModel's
weights from without TensorFlow: every key read must give a value or ``Unreadable``, never another exception.
"""

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import zlib
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


# ------------------------------------------------------------------ run folders: deploy report and compare

RUN_FILES = ("run.json", "benchmark/benchmark.json", "check/check.json", "convert/comparison.json", "comparison.json",
             "rewrite/rewrite.json", "train/history.json", "train/manifest.json", "convert/manifest.json",
             "engine/manifest.json", "benchmark/manifest.json", "FAILED")
RUN_COMMANDS = ("report", "markdown", "compare", "history")


def _pick(word, choices):
    """``word`` when it is one of ``choices``, else one of them chosen by its hash (every input is a case)."""
    return word if word in choices else choices[zlib.crc32(word.encode("utf-8", "replace")) % len(choices)]


def parse_run_case(data):
    """A run-folder case: ``<file> <command> [set <key.path>]`` on the first line, then the file's bytes (or,
    with ``set``, a JSON value put at that key of the file a complete run writes)."""
    head, _, body = data.partition(b"\n")
    words = head.decode("utf-8", "replace").split()
    name = _pick(words[0] if words else "", RUN_FILES)
    command = _pick(words[1] if len(words) > 1 else "", RUN_COMMANDS)
    key = words[3] if len(words) > 3 and words[2] == "set" else None
    return name, command, key, body


def _set(data, key, value):
    """``data`` with ``value`` at the dotted ``key`` (list positions as numbers); the value itself when the key
    does not lead anywhere."""
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            if last:
                node[int(part)] = value
                return data
            node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
                return data
            node = node.setdefault(part, {})
        else:
            return value
    return data


_TEMPLATES = {}


def _template():
    """Two complete run folders (reportkit.make_run), made once: the baseline and the current night."""
    if not _TEMPLATES:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from reportkit import make_run

        root = SCRATCH / "templates"
        _TEMPLATES["baseline"] = make_run(root / "baseline", finished="2026-11-23T02:00:00+0000")
        _TEMPLATES["current"] = make_run(root / "current", medians={1: 4.1, 8: 20.5}, seed=3)
        for argv in (["report", str(root / "current")], ["report", str(root / "baseline"), "--history",
                                                          str(root / "current")]):
            _deploy(argv)  # the plots of unchanged data are cached (<run>/.report): each case draws only what it changed
    return _TEMPLATES


def _deploy(argv):
    """(exit code, stderr) of ``deploy argv`` in this process; any exception but DeployError escapes."""
    from pipeline.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def runs(data: bytes):
    name, command, key, body = parse_run_case(data)
    folders = _template()
    case = SCRATCH / "case"
    shutil.rmtree(str(case), ignore_errors=True)
    run = case / "night"
    shutil.copytree(str(folders["current"]), str(run))
    target = run / name
    if key is not None:
        try:
            original = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else {}
            body = json.dumps(_set(original, key, json.loads(body.decode("utf-8")))).encode()
        except (ValueError, UnicodeDecodeError, RecursionError):
            pass  # not JSON: the bytes are the file
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(body)
    baseline = str(folders["baseline"])
    argv = {"report": ["report", str(run), "-o", str(case / "report.html")],
            "markdown": ["report", str(run), "--format", "markdown"],
            "compare": ["compare", baseline, str(run), "--format", "json"],
            "history": ["compare", baseline, baseline, "--history", str(run), "--format", "markdown"]}[command]
    code, err = _deploy(argv)
    if command == "history" and code == 0:
        code, err = _deploy(["report", baseline, "--history", str(run), "-o", str(case / "history.html")])
    assert code in (0, 1, 4), "deploy {} exited {}: {}".format(" ".join(argv), code, err[-400:])
    if code == 1:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("deploy: error: "), \
            "deploy {}: not one error line: {!r}".format(" ".join(argv), err[-400:])


# ------------------------------------------------------------------ the agent's answer, as the host reads it


class _Answering:
    """A transport whose agent answers with the fuzzer's line."""

    kind = "local"
    python = "python3"

    def __init__(self, line):
        self.line = line

    def describe(self):
        return "the fuzzed agent"

    def python_setting(self):
        return "device.python: python3"

    def call(self, request, timeout=None, what=None):
        from pipeline.device.errors import agent_failure
        from pipeline.device.process import parse_answer

        answer = parse_answer(self.line, self.describe(), what or request.get("command"))
        if not answer["ok"]:
            raise agent_failure(answer, self.describe(), what)
        return answer["result"]


def agent(data: bytes):
    from types import SimpleNamespace

    from pipeline.device.client import Device, fingerprint, hardware_label
    from pipeline.errors import DeployError

    device = Device.__new__(Device)
    device.cfg = SimpleNamespace(backend="auto", on_version_mismatch="warn")
    device.transport = _Answering(data)
    device._ping = device._probe = None
    target = SimpleNamespace(tensorrt="8.2.1", name="jetson_tx2", jetpack="4.6")
    try:
        device.backend()
        device.check_tensorrt(target, warn=lambda message: None)
        facts = fingerprint(device.probe())
        hardware_label(facts)
        json.dumps(facts)
    except DeployError as e:
        assert "\n" not in e.message.strip(), "a DeployError must be one line: {!r}".format(e.message)


# ------------------------------------------------------------------ one record, through its schema


def records_target(data: bytes):
    from pipeline import records
    from pipeline.errors import DeployError
    from pipeline.records import MODELS

    head, _, body = data.partition(b"\n")
    kinds = sorted(MODELS)
    kind = _pick(head.decode("utf-8", "replace").strip(), kinds)
    path = SCRATCH / "record.json"
    path.write_bytes(body)
    try:
        taken = records.read(path, kind)
    except DeployError as e:
        assert "\n" not in e.message.strip(), "a DeployError must be one line: {!r}".format(e.message)
        return
    if taken is None:
        return
    records.write(SCRATCH / "again.json", taken, kind)  # what a reader takes, the writer writes back
    _computable(taken, kind)


_LATENCY = ("mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "min_ms", "std_ms")


def _computable(taken, kind):
    """What a reader computes with is computable: a benchmark row's latencies are 0 or 1e-9..1e9 ms (so the ratio
    of two, the gate's relative change, is finite) and its batch size and iterations convert to floats; the gate's
    relative changes are finite."""
    import math

    rows = taken.get("results") if kind == "benchmark" else None
    for row in rows or []:
        for key in _LATENCY + ("throughput_ips",):
            value = row.get(key)
            if value is not None and value != 0:
                assert math.isfinite(4.0 / value) and math.isfinite(value / 1e-9) and math.isfinite(value * 65536), \
                    (key, value)
        for value in row.get("percentiles_ms") or []:
            assert value == 0 or math.isfinite(4.0 / value), value
        float(row["batch_size"]), float(row.get("iterations") or 1)
    for row in (taken.get("rows") if kind == "comparison" else None) or []:
        assert row.get("change") is None or math.isfinite(float(row["change"])), row


def bundle(data: bytes):
    from pipeline.graph.diff.weights import Bundle, Unreadable, _damage

    folder = Path(tempfile.mkdtemp(dir=str(SCRATCH)))
    try:
        (folder / "variables.index").write_bytes(data)
        (folder / "variables.data-00000-of-00001").write_bytes(bytes(range(256)) * 16)
        try:
            found = Bundle(folder / "variables")
        except Exception as e:  # the SavedModel reader turns parse errors into Unreadable (_damage): the same here
            if _damage(e) is None:
                raise
            return
        for key in list(found.entries)[:64]:
            try:
                value = found.read(key.decode("utf-8", "replace"))
            except Exception as e:  # noqa: BLE001 - SavedModelVariables.value turns exactly these into Unreadable
                if _damage(e) is None:
                    raise
                continue
            value.array()  # as deploy diff calls it (variable_change): nothing may escape
            if value.dtype == "string":
                try:
                    value.strings()
                except Unreadable:
                    pass
    finally:
        shutil.rmtree(str(folder), ignore_errors=True)


TARGETS = {"readers": readers, "config": config, "runs": runs, "agent": agent, "records": records_target, "bundle": bundle}
