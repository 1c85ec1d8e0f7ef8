"""pipeline/report/machine.py: the one reading of the machine a run measured. What the device records
(pipeline.device.client.fingerprint of a probe) is what the gate compares and what the report prints."""

import pytest

from pipeline.device.client import FINGERPRINT_FIELDS
from pipeline.device.client import fingerprint as record
from pipeline.report import machine

JETSON_PROBE = {"kind": "jetson", "gpu": None, "board": "jetson_tx2", "model": "NVIDIA Jetson TX2", "l4t": "32.7.6",
                "jetpack": "4.6.6", "tensorrt": "8.2.1", "cuda": "10.2", "cudnn": "8.2.1", "python": "3.6.9",
                "power_mode": {"mode_id": 0, "mode_name": "MAXN"}, "clocks_locked": False, "hostname": "tx2",
                "machine": "aarch64", "uptime_s": 12.0}  # uptime: a probe fact no run records
DESKTOP_PROBE = {"kind": "desktop-gpu", "gpu": "NVIDIA GeForce RTX 4090", "gpu_driver": "550.54.14",
                 "tensorrt": "10.3.0", "cuda": "12.6", "machine": "x86_64"}


def _run(where):
    return {"benchmark": {"where": where}}


def test_the_cli_offers_the_gate_keys():
    from pipeline.cli.verbs.compare import FINGERPRINT_KEYS

    assert FINGERPRINT_KEYS == machine.FINGERPRINT_KEYS


def test_what_a_jetson_records_is_what_the_gate_and_the_report_read():
    fp = record(JETSON_PROBE)
    assert sorted(fp) == sorted(FINGERPRINT_FIELDS)
    run = _run({"runtime": "tensorrt", "on_target_device": True, "fingerprint": fp})
    assert machine.fingerprint(run) == {"kind": "jetson", "board": "jetson_tx2", "gpu": None, "jetpack": "4.6.6",
                                        "tensorrt": "8.2.1", "runtime": "tensorrt", "power_mode": "MAXN",
                                        "clocks": "not locked", "converters": None}
    assert machine.fingerprint_items(run) == [("board", "jetson_tx2"), ("L4T", "32.7.6"), ("JetPack", "4.6.6"),
                                              ("TensorRT", "8.2.1"), ("CUDA", "10.2"), ("power mode", "MAXN"),
                                              ("clocks", "NOT locked")]
    assert not machine.is_host_only(run)
    assert machine.hardware(run)["label"] == "Jetson jetson_tx2 (JetPack 4.6.6, TensorRT 8.2.1, power mode MAXN, clocks not locked)"


def test_a_desktop_gpu_is_named_by_both():
    run = _run({"runtime": "tensorrt", "on_target_device": False, "fingerprint": record(DESKTOP_PROBE)})
    gate = machine.fingerprint(run)
    assert (gate["kind"], gate["gpu"], gate["board"]) == ("desktop-gpu", "NVIDIA GeForce RTX 4090", None)
    assert ("GPU", "NVIDIA GeForce RTX 4090") in machine.fingerprint_items(run)
    assert not machine.is_host_only(run)
    assert machine.hardware(run)["label"] == "desktop GPU NVIDIA GeForce RTX 4090: not a Jetson"


def test_host_figures_are_the_host_cpus():
    run = _run({"runtime": "onnxruntime", "version": "1.17.1", "on_target_device": False,
                "host": {"cpu": "AMD EPYC 7B13", "cpu_count": 8, "machine": "x86_64"}})
    assert machine.is_host_only(run) and machine.fingerprint(run)["kind"] == "host-cpu"
    assert machine.fingerprint_items(run) == [("host CPU", "AMD EPYC 7B13 (8 cores, x86_64)"),
                                              ("figures", "host CPU's, not a Jetson's"), ("runtime", "onnxruntime 1.17.1")]


def test_a_night_without_a_benchmark_shows_the_references_machine():
    reference = machine.fingerprint(_run({"runtime": "tensorrt", "fingerprint": record(JETSON_PROBE)}))
    items = machine.fingerprint_items({"benchmark": None}, gate={"reference": {"fingerprint": reference}})
    assert items == [("board", "jetson_tx2"), ("JetPack", "4.6.6"), ("TensorRT", "8.2.1"), ("power mode", "MAXN"),
                     ("clocks", "NOT locked")]
    assert machine.fingerprint_items({"benchmark": None}) == []


@pytest.mark.parametrize("dropped", ["board", "jetpack", "tensorrt", "power_mode", "clocks_locked", "kind"])
def test_a_fact_the_device_stops_recording_breaks_the_reader_loudly(monkeypatch, dropped):
    """The reader reads by the device's own field names: a field dropped there is a KeyError here, not a
    fingerprint that quietly reads None on every run (and so matches every other run)."""
    monkeypatch.setattr(machine, "FINGERPRINT_FIELDS", tuple(f for f in FINGERPRINT_FIELDS if f != dropped))
    run = _run({"runtime": "tensorrt", "on_target_device": True, "fingerprint": record(JETSON_PROBE)})
    with pytest.raises(KeyError):
        machine.fingerprint(run)


def _converted(tmp_path, name, tools):
    from reportkit import edit_json, make_run

    run = make_run(tmp_path / name)
    if tools is not None:
        edit_json(run / "convert" / "manifest.json", lambda m: m.update(stage_tools=tools))
    return run


def test_the_converter_versions_are_in_the_fingerprint_issue_28(tmp_path):
    """Issue 28 item 5: a red night can come from a converter, not the commit: the versions the convert stage
    ran with are a gate key (old: not recorded, a tf2onnx upgrade changed the engine unseen)."""
    from pipeline.report.collect import load_run
    from pipeline.report.compare import compare_runs

    tools = {"tensorflow": "2.21.0", "tf2onnx": "1.17.0", "onnx": "1.17.0", "onnxruntime": "1.20.1"}
    base = load_run(_converted(tmp_path, "base", tools))
    assert machine.fingerprint(base)["converters"] == "tensorflow 2.21.0, tf2onnx 1.17.0, onnx 1.17.0, onnxruntime 1.20.1"
    assert ("converters", "tensorflow 2.21.0, tf2onnx 1.17.0, onnx 1.17.0, onnxruntime 1.20.1") in \
        machine.fingerprint_items(base)
    newer = load_run(_converted(tmp_path, "newer", dict(tools, tf2onnx="1.18.0")))
    result = compare_runs(base, newer)
    assert result["verdict"] == "not comparable" and "converters" in result["reasons"][0]
    assert compare_runs(base, newer, expect_change=["converters"])["verdict"] == "pass"
    older = load_run(_converted(tmp_path, "older", None))  # not recorded (a run from before): not a difference
    assert machine.fingerprint(older)["converters"] is None and compare_runs(base, older)["verdict"] == "pass"
