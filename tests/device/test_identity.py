"""agent.identity on every real record in samples/identity/ (provenance: PROVENANCE.md there).

Sample files mark annotations with '##'; every other line is verbatim file content / command output.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from pipeline.device.agent import ParseError
from pipeline.device.agent.identity import (BOARDS, JETPACK_FOR_L4T, jetpack_for_l4t, parse_device_tree_model,
                                             parse_jetson_clocks_show, parse_nv_tegra_release, parse_nvpmodel_q)

SAMPLES = Path(__file__).parent / "samples" / "identity"
TARGETS = Path(__file__).resolve().parents[2] / "targets"


def _data_lines(name):
    return [line for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines() if not line.startswith("##")]


def _records(name, starts):
    """Verbatim records: a record begins at a line matching ``starts`` and runs until the next one."""
    records = []
    for line in _data_lines(name):
        if re.match(starts, line):
            records.append([line])
        elif records and line.strip():
            records[-1].append(line)
    return ["\n".join(r) + "\n" for r in records]


def test_every_sample_file_is_covered():
    assert sorted(p.name for p in SAMPLES.glob("*.txt")) == sorted([
        "device_tree_model.txt", "jetson_clocks_show.txt", "l4t_to_jetpack.txt", "nv_tegra_release.txt",
        "nvpmodel_q.txt"])
    assert (SAMPLES / "PROVENANCE.md").is_file()


# --------------------------------------------------------------------------------------- /etc/nv_tegra_release

RELEASES = _records("nv_tegra_release.txt", r"^# R\d+ ")
# (l4t, board, gcid, jetpack, kernel_variant) per record, in file order
RELEASE_FACTS = [
    ("32.7.1", "t186ref", "29689809", "4.6.1", None),
    ("34.1.1", "t186ref", "30414990", "5.0.1 DP", None),
    ("35.2.1", "t186ref", "32398013", "5.1", None),
    ("35.3.1", "t186ref", "32790763", "5.1.1", None),
    ("32.7.1", "t210ref", "29818004", "4.6.1", None),
    ("32.7.3", "t210ref", "31982016", "4.6.3", None),
    ("36.4.3", "generic", "38968081", "6.2", "oot"),
    ("36.4.7", "generic", "42132812", "6.2.1", "oot"),
    ("36.4.4", "generic", "41062509", "6.2.1", "oot"),
    ("36.5.0", "generic", "43688277", "6.2.2", "oot"),
    ("39.2.1", "generic", "46758480", "7.2", "oot"),  # 39.2.1 is in neither table: R39.x is 7.2 in both
]


def test_nv_tegra_release_sample_count():
    assert len(RELEASES) == len(RELEASE_FACTS) == 11


@pytest.mark.parametrize("text,facts", list(zip(RELEASES, RELEASE_FACTS)), ids=[f[0] + "-" + f[1] for f in RELEASE_FACTS])
def test_nv_tegra_release_every_sample(text, facts):
    l4t, board, gcid, jetpack, variant = facts
    r = parse_nv_tegra_release(text)
    assert json.loads(json.dumps(r)) == r
    assert (r["l4t"], r["board"], r["gcid"], r["kernel_variant"]) == (l4t, board, gcid, variant)
    assert r["major"] == int(l4t.split(".")[0]) and r["revision"] == l4t.split(".", 1)[1]
    assert r["eabi"] == "aarch64" and r["synthetic"] is False
    assert jetpack_for_l4t(r["l4t"]) == jetpack


def test_nv_tegra_release_reads_only_the_first_line():
    seeed = next(t for t in RELEASES if "Seeed" in t)
    r = parse_nv_tegra_release(seeed)
    assert r["l4t"] == "36.4.4" and r["date"] == "Mon Jun 16 16:07:13 UTC 2025"
    r39 = parse_nv_tegra_release(RELEASES[-1])
    assert r39["date"] == "Fri Aug  7 05:54:22 AM UTC 2026" and r39["major"] == 39


def test_nv_tegra_release_synthetic_container_file():
    # the format jetson-containers' nv_tegra_release() writes when the host file is missing (PROVENANCE.md)
    fake = ("# R36 (release), REVISION: 4.3, GCID: 12345678, BOARD: generic, EABI: aarch64, DATE: Mon Jan 06 10:00:00 "
            "UTC 2025\n# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n")
    r = parse_nv_tegra_release(fake)
    assert r["synthetic"] is True and r["l4t"] == "36.4.3"


@pytest.mark.parametrize("text", [
    "", "\n\n", "garbage", "# R36 (release)", "# R36 (release), REVISION: ", "36.4.3-20250107174145",
    "# KERNEL_VARIANT: oot\n" + RELEASE_FACTS[0][0], "R32 (release), REVISION: 7.1",
])
def test_nv_tegra_release_malformed(text):
    with pytest.raises(ParseError, match="nv_tegra_release"):
        parse_nv_tegra_release(text)


# --------------------------------------------------------------------------------------------- L4T -> JetPack

def _tables():
    text = (SAMPLES / "l4t_to_jetpack.txt").read_text(encoding="utf-8")
    jtop_part, containers_part = text.split("## ---------------- jetson-containers", 1)
    pattern = r'^\s*"([\d.]+)":\s*"([^"]+)"'
    return dict(re.findall(pattern, jtop_part, re.M)), dict(re.findall(pattern, containers_part, re.M))


def _normalise(value):
    """A table label as this module writes it: no ' GA' / ' (rev1)', alternatives ascending with '/'."""
    parts = [p.strip().replace(" GA", "").replace(" (rev1)", "") for p in value.split("|")]
    return "/".join(sorted(parts, key=lambda p: [int(n) for n in p.split(" ")[0].split(".")]))


def _three(key):
    return key if key.count(".") == 2 else key + ".0"


# where the two tables disagree, the value this module chose (see identity.py)
CHOSEN = {"36.4.2": "6.1", "36.5.0": "6.2.2"}


def test_jetpack_table_is_the_two_reference_tables():
    jtop, containers = _tables()
    assert len(jtop) == 79 and len(containers) == 53
    assert set(JETPACK_FOR_L4T) == {_three(k) for k in list(jtop) + list(containers)}
    for name, table in (("jtop", jtop), ("containers", containers)):
        for key, value in table.items():
            want = CHOSEN.get(_three(key), _normalise(value))
            assert JETPACK_FOR_L4T[_three(key)] == want, (name, key, value)
            assert jetpack_for_l4t(key) == want
    disagreements = {_three(k) for k in set(jtop) & set(containers) if _normalise(jtop[k]) != _normalise(containers[k])}
    assert disagreements == {"36.4.2", "36.5.0"}


@pytest.mark.parametrize("l4t,jetpack", [
    ("32.7.1", "4.6.1"), ("R32.7.1", "4.6.1"), ("32.5", "4.5"), ("32.7.6", "4.6.6"), ("35.6.1", "5.1.5"),
    ("36.4.3", "6.2"), ("36.4.7", "6.2.1"), ("36.5.0", "6.2.2"), ("36.4.2", "6.1"),
    ("32.7.9", "4.6"), ("36.4.5", "6.1/6.2"), ("39.2.1", "7.2"), ("38.3.0", "7.0/7.1"), ("35.9.0", "5.0/5.1"),
    ("99.1.0", None), ("abc", None), ("", None), (None, None),
])
def test_jetpack_for_l4t(l4t, jetpack):
    assert jetpack_for_l4t(l4t) == jetpack


# ---------------------------------------------------------------------------------------- device-tree model

MODEL_BOARD = {"TX1": None, "TX2": "jetson_tx2", "Nano": "jetson_nano", "AGX Xavier": "agx_xavier",
               "Xavier NX": "xavier_nx", "AGX Orin": "agx_orin", "Orin NX": "orin_nx", "Orin Nano": "orin_nano"}
MODELS = [tuple(part.strip() for part in line.split("|")) for line in _data_lines("device_tree_model.txt")
          if line.strip() and "not found" not in line]


def test_device_tree_model_sample_count():
    assert len(MODELS) == 13  # plus the Thor row, whose string was not found


@pytest.mark.parametrize("row", MODELS, ids=[r[2] for r in MODELS])
def test_device_tree_model_every_sample(row):
    family, _release, model, _source = row
    for raw in (model, model + "\x00", (model + "\x00").encode("utf-8")):  # the real file ends in a NUL
        assert parse_device_tree_model(raw) == {"model": model, "board": MODEL_BOARD[family]}


def test_board_names_are_the_target_files():
    names = {}
    for path in TARGETS.glob("*.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert data["name"] == path.stem
        names[path.stem] = data
    assert set(BOARDS) == set(names) - {"host_cpu"}
    assert {b for b in MODEL_BOARD.values() if b} == set(BOARDS)  # every board is reached by a real string


@pytest.mark.parametrize("model,board", [
    ("NVIDIA Jetson Nano 2GB Developer Kit", "jetson_nano"), ("NVIDIA Jetson Xavier NX Developer Kit", "xavier_nx"),
    ("NVIDIA Jetson AGX Xavier Developer Kit", "agx_xavier"), ("NVIDIA Jetson TX2 NX Developer Kit", "jetson_tx2"),
    ("storm", "jetson_tx2"), ("NVIDIA Jetson AGX Thor Developer Kit", None), ("some custom carrier", None),
])
def test_device_tree_model_other_strings(model, board):
    assert parse_device_tree_model(model)["board"] == board


@pytest.mark.parametrize("text", ["", "\x00", "  \n", "line one\nline two", "bad\x01byte"])
def test_device_tree_model_malformed(text):
    with pytest.raises(ParseError):
        parse_device_tree_model(text)


# ------------------------------------------------------------------------------------------------ nvpmodel -q

def test_nvpmodel_every_sample():
    lines = [line for line in _data_lines("nvpmodel_q.txt") if line.strip()]
    assert lines == ["NV Power Mode: MAXN", "0", "# NV Power Mode: MAXN_SUPER"]
    thor = parse_nvpmodel_q("\n".join(lines[:2]) + "\n")
    assert thor == {"mode_name": "MAXN", "mode_id": 0, "is_max": True}
    # [B] is the blog's expected-output comment: its '# ' is the page's, not nvpmodel's; the page shows no id
    orin_nano = parse_nvpmodel_q(lines[2][2:])
    assert orin_nano == {"mode_name": "MAXN_SUPER", "mode_id": None, "is_max": True}


def test_nvpmodel_emulator_format_with_warning_line():
    # the jtop emulator's show_query format, as quoted in the sample's annotation [C]
    out = "NVPM WARN: fan mode is not set!\nNV Power Mode: MODE_15W\n2\n"
    assert parse_nvpmodel_q(out) == {"mode_name": "MODE_15W", "mode_id": 2, "is_max": False}
    assert parse_nvpmodel_q(b"NV Power Mode: 5W\n1\n") == {"mode_name": "5W", "mode_id": 1, "is_max": False}


@pytest.mark.parametrize("text", ["", "garbage", "NV Power Mode[2]: 15W", "NV Power Mode:", "NV Power Mo"])
def test_nvpmodel_malformed(text):
    with pytest.raises(ParseError, match="NV Power Mode"):
        parse_nvpmodel_q(text)


# ------------------------------------------------------------------------------------- jetson_clocks --show

CLOCKS = _records("jetson_clocks_show.txt", r"^SOC family:")


def test_jetson_clocks_sample_count():
    assert len(CLOCKS) == 5


def test_jetson_clocks_nano_cut_after_header():
    r = parse_jetson_clocks_show(CLOCKS[0])
    assert r["soc_family"] == "tegra210" and r["machine"] == "NVIDIA Jetson Nano Developer Kit"
    assert r["online_cpus"] == [0, 1, 2, 3] and r["cpus"] == [] and r["gpu"] is None
    assert r["locked"] is None  # cut before any clock: cannot tell


def test_jetson_clocks_agx_orin_jp5_not_locked():
    r = parse_jetson_clocks_show(CLOCKS[1])
    assert r["soc_family"] == "tegra234" and r["machine"] == "NVIDIA Orin Jetson-Small Developer Kit"
    assert r["online_cpus"] == list(range(12))
    assert [c["index"] for c in r["cpus"]] == [0, 1, 2, 3, 4, 5, 6, 10, 11]  # printed cpu0, cpu1, cpu10, cpu11, cpu2..
    assert r["cpus"][0] == {"index": 0, "online": True, "governor": "schedutil", "min_khz": 115200,
                            "max_khz": 2201600, "current_khz": 2112000}
    assert r["cpus"][-1]["current_khz"] == 1190400
    assert r["locked"] is False and r["gpu"] is None


def test_jetson_clocks_orin_nx_not_locked():
    r = parse_jetson_clocks_show(CLOCKS[2])
    assert r["machine"] == "NVIDIA Jetson Orin NX Engineering Reference Developer Kit"
    assert len(r["cpus"]) == 7 and {(c["min_khz"], c["max_khz"]) for c in r["cpus"]} == {(729600, 1984000)}
    assert r["cpus"][5]["current_khz"] == 1984000 and r["cpus"][0]["current_khz"] == 1728000
    assert r["locked"] is False


def test_jetson_clocks_tx2_fixture_full_output():
    r = parse_jetson_clocks_show(CLOCKS[3])
    assert r["machine"] == "quill" and r["online_cpus"] == [0, 3, 4, 5]
    assert [c["online"] for c in r["cpus"]] == [True, False, False, True, True, True]
    assert r["gpu"] == {"min_hz": 114750000, "max_hz": 1134750000, "current_hz": 114750000}
    assert r["emc"] == {"min_hz": 40800000, "max_hz": 1600000000, "current_hz": 1600000000, "freq_override": 0}
    assert r["fan_speed"] == 0 and r["nvpmodel_mode"] == "MAXP_CORE_ARM"
    assert r["locked"] is False  # cpu3 at 1881600 of 2035200, GPU at its minimum
    # the same output after jetson_clocks: online CPUs and GPU at max; the offline Denver cores do not count
    after = CLOCKS[3].replace("CurrentFreq=1881600", "CurrentFreq=2035200").replace(
        "CurrentFreq=114750000", "CurrentFreq=1134750000")
    assert parse_jetson_clocks_show(after)["locked"] is True


def test_jetson_clocks_tx1_r28_locked():
    r = parse_jetson_clocks_show(CLOCKS[4])
    assert r["soc_family"] == "tegra210" and r["machine"] == "jetson_tx1"
    assert [c["governor"] for c in r["cpus"]] == ["interactive"] * 4  # from the tool's "Gonvernor=" typo
    assert all(c["online"] and c["current_khz"] == c["max_khz"] == 1734000 for c in r["cpus"])
    assert r["gpu"] == {"min_hz": 998400000, "max_hz": 998400000, "current_hz": 998400000}
    assert r["emc"]["freq_override"] == 1 and r["fan_speed"] == 255 and r["nvpmodel_mode"] is None
    assert r["locked"] is True
    assert json.loads(json.dumps(r)) == r


@pytest.mark.parametrize("text,message", [
    ("", "not jetson_clocks"),
    ("garbage\nmore garbage", "not jetson_clocks"),
    ("SOC family:tegra234  Machine:x\ncpu0: Online=1 Governor=schedutil MinFreq=115200 MaxFr", "MaxFreq"),
    ("GPU MinFreq=1 MaxFreq=", "MaxFreq"),
    ("Online CPUs: 0-x", "not jetson_clocks"),
])
def test_jetson_clocks_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_jetson_clocks_show(text)


def test_nvidia_smi_query_and_the_kind_of_machine():
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader``: one line per GPU; JetPack 6's
    nvidia-smi names the Orin GPU "Orin (nvgpu)" (anduril/jetpack-nixos#371), which is a Jetson, not a desktop GPU."""
    from pipeline.device.agent.identity import is_tegra_gpu, machine_kind, parse_nvidia_smi_query

    assert parse_nvidia_smi_query("NVIDIA GeForce RTX 4090, 550.54.14\n") == [
        {"name": "NVIDIA GeForce RTX 4090", "driver": "550.54.14"}]
    two = parse_nvidia_smi_query(b"NVIDIA H100 80GB HBM3, 535.104.05\nNVIDIA A100-SXM4-40GB, 535.104.05\n")
    assert [g["name"] for g in two] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert parse_nvidia_smi_query("Orin (nvgpu), 540.4.0") == [{"name": "Orin (nvgpu)", "driver": "540.4.0"}]
    for bad in ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                "latest NVIDIA driver is installed and running.", "", "No devices were found"):
        with pytest.raises(ParseError):
            parse_nvidia_smi_query(bad)
    assert is_tegra_gpu("Orin (nvgpu)") and is_tegra_gpu("NVIDIA Thor") and not is_tegra_gpu("NVIDIA GeForce RTX 4090")
    assert machine_kind("32.7.1", "jetson_tx2", None) == "jetson"
    assert machine_kind(None, None, "Orin (nvgpu)") == "jetson"  # a JetPack 6 container without nv_tegra_release
    assert machine_kind(None, None, "NVIDIA GeForce RTX 4090") == "desktop-gpu"
    assert machine_kind(None, None, None) == "cpu"


def _probe_lines(binding):
    from pipeline.device.identify import format_probe

    report = {"device": "local", "matches": None, "differences": [], "config_target": None,
              "probe": {"kind": "cpu", "python": "3.6.9", "executable": "/usr/bin/python3", "cuda_binding": binding}}
    return [line for line in format_probe(report).splitlines() if line.startswith("binding")]


def test_the_probe_names_libcudart_as_what_a_board_needs():
    """The board needs the CUDA runtime JetPack ships (libcudart, through ctypes); pycuda and cuda-python are
    optional, so a probe that finds none of them names libcudart, never a pip package as required."""
    assert _probe_lines({"binding": None, "problem": "no libcudart"}) == [
        "binding    no CUDA runtime (libcudart; pycuda / cuda-python optional): see note"]
    assert _probe_lines(None) == ["binding    no CUDA runtime (libcudart; pycuda / cuda-python optional)"]
    assert _probe_lines({"binding": "libcudart", "version": "10.2", "module": None}) == ["binding    libcudart 10.2"]
