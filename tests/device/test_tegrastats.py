"""agent.tegrastats on every real tegrastats line in samples/tegrastats/ (provenance: PROVENANCE.md there).

Each sample file starts with '#' header lines (what + source); every other non-blank line is a verbatim
capture. jtop_emulator_templates.txt holds jetson-stats' emulator templates, "<board> <mode>: <line>" with
shell placeholders ($(($RANDOM%100+0)), $RAND_GPU, $RAND_GPU2): they are instantiated with fixed numbers here.
xavier-nx_jp5.txt is an UNVERIFIED line (no citable source): it is parsed for format coverage only.
"""

import json
import re
from pathlib import Path

import pytest

from pipeline.device.agent import ParseError
from pipeline.device.agent.tegrastats import (board_power_mw, energy_per_inference_mj, input_rail, parse_line,
                                               summarize)

SAMPLES = Path(__file__).parent / "samples" / "tegrastats"
TEMPLATES = "jtop_emulator_templates.txt"

# file -> CPU cores of each of its lines, in order (also fixes how many lines each file must hold)
CORES = {
    "tx1_l4t28_legacy.txt": [4, 4],
    "tx2_jp4.txt": [6, 6, 6, 6, 6, 6],
    "nano_jp4.txt": [4, 4],
    "agx-xavier_jp4.txt": [8],
    "xavier-nx_jp5.txt": [6],
    "orin-nano_jp6.txt": [6] * 11,
    "agx-orin_and_thor.txt": [12, 12, 0],  # Thor's line is a minimal test string without CPU
    TEMPLATES: [4, 6, 8, 12, 4, 6, 4, 6, 8, 12, 4, 6],
}


def _instantiate(template):
    line = re.sub(r"^[^:]+ (?:user|root): ", "", template)
    return line.replace("$(($RANDOM%100+0))", "37").replace("$RAND_GPU2", "21").replace("$RAND_GPU", "55")


def _lines(name):
    out = []
    for raw in (SAMPLES / name).read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        out.append(_instantiate(raw) if name == TEMPLATES else raw)
    return out


ALL = [(name, index, line) for name in sorted(CORES) for index, line in enumerate(_lines(name))]


def test_every_sample_file_is_covered_and_holds_its_lines():
    assert sorted(p.name for p in SAMPLES.glob("*.txt")) == sorted(CORES)
    assert (SAMPLES / "PROVENANCE.md").is_file()
    for name, cores in CORES.items():
        assert len(_lines(name)) == len(cores), name
    assert len(ALL) == 38


@pytest.mark.parametrize("name,index,line", ALL, ids=["{}:{}".format(n, i) for n, i, _ in ALL])
def test_every_sample_line_parses(name, index, line):
    r = parse_line(line)
    assert json.loads(json.dumps(r)) == r  # plain JSON
    assert 0 <= r["ram_mb"]["used"] <= r["ram_mb"]["total"]
    assert len(r["cpus"]) == CORES[name][index]
    for cpu in r["cpus"]:
        assert (cpu["load_pct"] is None) == (not cpu["online"])
        assert cpu["online"] is False or 0 <= cpu["load_pct"] <= 100 and cpu["freq_mhz"] > 0
    # rails, cross-checked with an independent regex over the raw line (NC = not connected, skipped)
    expected = {m.group(1): {"now": int(m.group(2)), "avg": int(m.group(3))}
                for m in re.finditer(r"(?:^|\s)([A-Za-z]\w*) (\d+)(?:mW)?/(\d+)(?:mW)?(?:/\d+(?:mW)?)?(?=\s|$)", line)
                if m.group(1) != "NC"}
    assert r["rails_mw"] == expected
    # temperatures: every name@xC token except the -256C "sensor absent" value
    temps = {m.group(1): float(m.group(2)) for m in re.finditer(r"(?:^|\s)(\w+)@(-?[\d.]+)C(?:/[\d.]+C)?(?=\s|$)", line)
             if float(m.group(2)) != -256}
    assert r["temps_c"] == temps
    stamp = re.match(r"^(\d\d-\d\d-\d{4} \d\d:\d\d:\d\d) ", line)
    assert r["timestamp"] == (stamp.group(1) if stamp else None)
    if r["gpu"] is not None:
        assert r["gpu"]["load_pct"] is None or 0 <= r["gpu"]["load_pct"] <= 100
        assert r["gpu"]["freq_mhz"] == (r["gpu"]["gpc_freqs_mhz"][0] if r["gpu"]["gpc_freqs_mhz"] else None)


# ------------------------------------------------------------------------------------------------- per board

def test_tx2_jp4_non_root_line_rails_ram_and_loads():
    r = parse_line(_lines("tx2_jp4.txt")[0])
    assert r["ram_mb"] == {"used": 2020, "total": 7852} and r["swap_mb"] is None and r["timestamp"] is None
    assert r["rails_mw"] == {"VDD_SYS_GPU": {"now": 153, "avg": 158}, "VDD_SYS_SOC": {"now": 536, "avg": 547},
                             "VDD_4V0_WIFI": {"now": 633, "avg": 527}, "VDD_IN": {"now": 3140, "avg": 3208},
                             "VDD_SYS_CPU": {"now": 536, "avg": 590}, "VDD_SYS_DDR": {"now": 557, "avg": 601}}
    assert input_rail(r["rails_mw"]) == "VDD_IN" and board_power_mw(r["rails_mw"]) == (3140, "VDD_IN")
    assert r["gpu"] == {"load_pct": 0, "freq_mhz": None, "gpc_freqs_mhz": []}  # non-root: no @MHz
    assert r["emc"] == {"load_pct": 0, "freq_mhz": None}
    assert [c["load_pct"] for c in r["cpus"]] == [9, 21, 25, 3, 1, 1] and {c["freq_mhz"] for c in r["cpus"]} == {345}
    assert r["temps_c"]["GPU"] == 41.0 and r["temps_c"]["thermal"] == 41.9 and r["temps_c"]["Tdiode"] == 41.25


def test_tx2_jp4_root_line_has_mhz_and_swap():
    r = parse_line(_lines("tx2_jp4.txt")[1])
    assert r["swap_mb"] == {"used": 1626, "total": 12122, "cached": 181}
    assert r["gpu"] == {"load_pct": 0, "freq_mhz": 114, "gpc_freqs_mhz": [114]}
    assert r["emc"] == {"load_pct": 1, "freq_mhz": 1866}
    assert [c["freq_mhz"] for c in r["cpus"]] == [1421, 2031, 2034, 1420, 1419, 1420]
    assert r["rails_mw"]["VDD_IN"] == {"now": 5297, "avg": 5297} and r["rails_mw"]["VDD_SYS_CPU"]["now"] == 1917


def test_tx2_class_board_without_rails_and_with_denver_cores_off():
    lines = _lines("tx2_jp4.txt")
    r = parse_line(lines[2])
    assert r["ram_mb"] == {"used": 1689, "total": 3825} and r["swap_mb"] == {"used": 0, "total": 1913, "cached": 0}
    assert r["cpus"][1] == {"online": False, "load_pct": None, "freq_mhz": None} and r["cpus"][2]["online"] is False
    assert r["cpus"][0] == {"online": True, "load_pct": 3, "freq_mhz": 345}
    assert r["rails_mw"] == {} and input_rail(r["rails_mw"]) is None and board_power_mw(r["rails_mw"]) == (None, None)
    # the source cut its last line after "EMC_FREQ 0% G": parsed as far as it goes, the cut "G" is ignored
    cut = parse_line(lines[5])
    assert lines[5].endswith("EMC_FREQ 0% G")
    assert cut["gpu"] is None and cut["emc"] == {"load_pct": 0, "freq_mhz": None}
    assert [c["load_pct"] for c in cut["cpus"]] == [11, None, None, 5, 96, 4] and cut["cpus"][0]["freq_mhz"] == 2035


def test_nano_jp4_root_lines():
    first, second = (parse_line(line) for line in _lines("nano_jp4.txt"))
    assert first["ram_mb"] == {"used": 1464, "total": 3964} and first["iram_kb"] == {"used": 0, "total": 252}
    assert first["swap_mb"] == {"used": 0, "total": 1982, "cached": 0}
    assert first["rails_mw"] == {"POM_5V_IN": {"now": 2746, "avg": 2911}, "POM_5V_GPU": {"now": 159, "avg": 161},
                                 "POM_5V_CPU": {"now": 796, "avg": 989}}
    assert input_rail(first["rails_mw"]) == "POM_5V_IN"
    assert first["gpu"] == {"load_pct": 7, "freq_mhz": 768, "gpc_freqs_mhz": [768]}
    assert first["emc"] == {"load_pct": 6, "freq_mhz": 1600}
    assert [c["load_pct"] for c in first["cpus"]] == [90, 16, 0, 9] and first["cpus"][0]["freq_mhz"] == 1479
    assert first["temps_c"] == {"PLL": 28.0, "CPU": 32.0, "PMIC": 50.0, "GPU": 28.5, "AO": 37.0, "thermal": 30.25}
    assert second["rails_mw"]["POM_5V_IN"] == {"now": 2980, "avg": 2911} and second["gpu"]["load_pct"] == 0


def test_agx_xavier_jp4_rails_have_no_input_rail():
    r = parse_line(_lines("agx-xavier_jp4.txt")[0])
    assert r["ram_mb"] == {"used": 14700, "total": 15692} and r["swap_mb"] == {"used": 898, "total": 8192, "cached": 23}
    rails = {k: v["now"] for k, v in r["rails_mw"].items()}
    assert rails == {"GPU": 463, "CPU": 618, "SOC": 2936, "CV": 0, "VDDRQ": 309, "SYS5V": 3306}
    # SYS5V is the 5 V system rail, not the input: it is smaller than GPU+CPU+SOC on this very line
    assert rails["SYS5V"] < rails["GPU"] + rails["CPU"] + rails["SOC"]
    assert input_rail(r["rails_mw"]) is None
    assert board_power_mw(r["rails_mw"]) == (7632, "sum_of_rails")
    assert r["temps_c"]["GPU"] == 30.5 and r["temps_c"]["PMIC"] == 100.0 and len(r["temps_c"]) == 8
    assert r["gpu"]["load_pct"] == 0 and r["gpu"]["freq_mhz"] is None and {c["freq_mhz"] for c in r["cpus"]} == {1190}


def test_orin_nano_jp6_idle_and_inference_lines():
    lines = _lines("orin-nano_jp6.txt")
    idle, busy = parse_line(lines[0]), parse_line(lines[8])
    assert idle["timestamp"] == "04-19-2026 01:31:10" and idle["swap_mb"] is None
    assert idle["ram_mb"] == {"used": 519, "total": 7607}
    assert idle["gpu"] == {"load_pct": 0, "freq_mhz": 1018, "gpc_freqs_mhz": [1018]}
    assert idle["emc"] == {"load_pct": 0, "freq_mhz": 3199}
    assert idle["rails_mw"] == {"VDD_IN": {"now": 5971, "avg": 5971}, "VDD_CPU_GPU_CV": {"now": 1669, "avg": 1669},
                                "VDD_SOC": {"now": 2308, "avg": 2308}}
    assert input_rail(idle["rails_mw"]) == "VDD_IN"
    assert idle["temps_c"] == {"cpu": 48.906, "soc2": 47.656, "soc0": 48.093, "gpu": 49.593, "tj": 49.593,
                               "soc1": 47.312}
    assert busy["timestamp"] == "04-19-2026 01:32:10" and busy["ram_mb"]["used"] == 4238
    assert busy["gpu"]["load_pct"] == 99 and busy["gpu"]["freq_mhz"] == 1010
    assert busy["emc"] == {"load_pct": 78, "freq_mhz": 3199}
    assert busy["rails_mw"]["VDD_IN"] == {"now": 21428, "avg": 10489}
    assert busy["rails_mw"]["VDD_CPU_GPU_CV"] == {"now": 9261, "avg": 3852}
    assert busy["temps_c"]["cpu"] == 55.0


def test_agx_orin_2025_line_two_gpcs_absent_sensors_and_nc_rails():
    r = parse_line(_lines("agx-orin_and_thor.txt")[0])
    assert r["timestamp"] == "04-11-2025 10:36:27" and r["ram_mb"] == {"used": 4321, "total": 62801}
    assert r["swap_mb"] == {"used": 19, "total": 31400, "cached": 0}
    assert r["gpu"] == {"load_pct": 0, "freq_mhz": 0, "gpc_freqs_mhz": [0, 0]}
    assert r["emc"] == {"load_pct": 0, "freq_mhz": 2133}
    assert all(c == {"online": True, "load_pct": 0, "freq_mhz": 729} for c in r["cpus"])
    assert not {"CV0", "CV1", "CV2", "GPU"} & set(r["temps_c"])  # -256C = sensor not available
    assert r["temps_c"]["CPU"] == 44.562 and r["temps_c"]["tj"] == 44.343 and r["temps_c"]["Tboard"] == 32.0
    assert r["rails_mw"] == {"VDD_GPU_SOC": {"now": 2340, "avg": 2340}, "VDD_CPU_CV": {"now": 390, "avg": 390},
                             "VIN_SYS_5V0": {"now": 4025, "avg": 4025}, "VDDQ_VDD2_1V8AO": {"now": 301, "avg": 301}}
    assert input_rail(r["rails_mw"]) is None
    assert board_power_mw(r["rails_mw"]) == (2340 + 390 + 4025 + 301, "sum_of_rails")


def test_agx_orin_jp7_three_value_rails_and_two_value_temps():
    r = parse_line(_lines("agx-orin_and_thor.txt")[1])
    assert r["timestamp"] == "07-25-2026 09:08:28" and r["ram_mb"] == {"used": 20642, "total": 62817}
    assert r["rails_mw"] == {"VDD_GPU_SOC": {"now": 5139, "avg": 5139}, "VDD_CPU_CV": {"now": 3268, "avg": 3268},
                             "VIN_SYS_5V0": {"now": 5500, "avg": 5500}}
    # why VIN_SYS_5V0 is not the board input: it is below the sum of the two SoC rails
    assert r["rails_mw"]["VIN_SYS_5V0"]["now"] < r["rails_mw"]["VDD_GPU_SOC"]["now"] + r["rails_mw"]["VDD_CPU_CV"]["now"]
    assert input_rail(r["rails_mw"]) is None
    assert r["gpu"] == {"load_pct": 12, "freq_mhz": 1300, "gpc_freqs_mhz": [1300, 1300]}
    assert r["emc"] == {"load_pct": 3, "freq_mhz": 3199}
    assert r["temps_c"] == {"cpu": 52.968, "soc2": 48.406, "soc0": 49.531, "gpu": 47.625}
    assert [c["load_pct"] for c in r["cpus"]][:3] == [23, 10, 4] and r["cpus"][0]["freq_mhz"] == 2201


def test_thor_gpu_frequencies_without_load():
    r = parse_line(_lines("agx-orin_and_thor.txt")[2])
    assert r["ram_mb"] == {"used": 4722, "total": 7844} and r["cpus"] == [] and r["rails_mw"] == {}
    assert r["gpu"] == {"load_pct": None, "freq_mhz": 1000, "gpc_freqs_mhz": [1000, 1000, 1000]}
    assert r["emc"] == {"load_pct": 2, "freq_mhz": 1866}


def test_tx1_l4t28_legacy_format():
    first, second = (parse_line(line) for line in _lines("tx1_l4t28_legacy.txt"))
    assert first["ram_mb"] == {"used": 3468, "total": 3983} and first["swap_mb"] == {"used": 873, "total": 8192,
                                                                                      "cached": 295}
    assert [c["load_pct"] for c in first["cpus"]] == [17, 13, 29, 5] and {c["freq_mhz"] for c in first["cpus"]} == {408}
    assert first["emc"] == {"load_pct": 1, "freq_mhz": 408}
    assert first["gpu"] == {"load_pct": 3, "freq_mhz": 76, "gpc_freqs_mhz": [76]}
    assert second["gpu"]["load_pct"] == 39 and second["emc"]["freq_mhz"] == 1600 and second["cpus"][2]["load_pct"] == 65


def test_xavier_nx_unverified_line_format():
    r = parse_line(_lines("xavier-nx_jp5.txt")[0])
    assert r["ram_mb"] == {"used": 2690, "total": 6854} and r["cpus"][4]["online"] is False
    assert r["gpu"] == {"load_pct": 0, "freq_mhz": 510, "gpc_freqs_mhz": [510]}
    assert input_rail(r["rails_mw"]) == "VDD_IN" and r["rails_mw"]["VDD_IN"] == {"now": 5079, "avg": 5079}


def test_emulator_templates_r28_tx2_rails_and_second_gpc():
    lines = _lines(TEMPLATES)
    tx2 = parse_line(lines[1])
    assert {k: v["now"] for k, v in tx2["rails_mw"].items()} == {"VDD_IN": 1038, "VDD_CPU": 153, "VDD_GPU": 153,
                                                                "VDD_SOC": 384, "VDD_WIFI": 38, "VDD_DDR": 192}
    assert input_rail(tx2["rails_mw"]) == "VDD_IN"
    orin_root = parse_line(lines[9])
    assert orin_root["timestamp"] == "01-03-2023 16:07:54"
    assert orin_root["gpu"] == {"load_pct": 55, "freq_mhz": 0, "gpc_freqs_mhz": [0]}
    assert orin_root["gpu2"] == {"load_pct": 21, "freq_mhz": 0, "gpc_freqs_mhz": [0]}
    assert orin_root["emc"] == {"load_pct": 0, "freq_mhz": 204}
    assert orin_root["rails_mw"]["VDD_GPU_SOC"] == {"now": 2390, "avg": 2390} and "NC" not in orin_root["rails_mw"]
    extra = parse_line(lines[5])  # SWAP after CPU, rails interleaved with engines (NVENC 716 NVDEC 716)
    assert extra["swap_mb"] == {"used": 149, "total": 1024, "cached": 7}
    assert extra["ram_mb"] == {"used": 4722, "total": 7844}
    assert extra["rails_mw"]["VDD_DDR"] == {"now": 2702, "avg": 2702} and extra["temps_c"]["BCPU"] == -45.0


def test_raw_emulator_template_is_not_a_line():
    raw = next(line for line in (SAMPLES / TEMPLATES).read_text(encoding="utf-8").splitlines()
               if line.startswith("TX2 user: "))
    with pytest.raises(ParseError, match="CPU entry"):
        parse_line(raw)


# ------------------------------------------------------------------------------------------------- malformed

GOOD = _lines("tx2_jp4.txt")[0]


@pytest.mark.parametrize("line,message", [
    ("", "no 'RAM"),
    ("   ", "no 'RAM"),
    ("garbage that is not tegrastats", "garbage that is not tegrastats"),
    ("[I] Average on 10 runs - GPU latency: 1.2 ms", "not a tegrastats line"),
    ("RAM 1690/38", "RAM field is cut"),
    ("RAM 1690/3825MB (lfb 339x4MB) SWAP 0/19", "SWAP field is cut"),
    ("RAM 1690/3825MB (lfb 339x4MB) SWAP 0/1913MB (cached 0MB) CPU [11%@2035,off,of", "CPU list is cut"),
    ("RAM 1690/3825MB (lfb 339x4MB) CPU [11%@2035,zz] EMC_FREQ 0%", "CPU entry 'zz'"),
    ("RAM 1690/3825MB (lfb 339x4MB) CPU [11%@2035] EMC_FREQ 0% GR3D_FREQ", "GR3D_FREQ value None"),
    ("RAM 1690/3825MB (lfb 339x4MB) CPU [11%@2035] EMC_FREQ abc", "EMC_FREQ value 'abc'"),
    (GOOD[:4], "RAM field is cut"),
])
def test_malformed_lines_raise_parse_error_naming_the_line(line, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        parse_line(line)


def test_parse_error_is_a_value_error_and_bytes_are_accepted():
    assert issubclass(ParseError, ValueError)
    assert parse_line(GOOD.encode("utf-8") + b"\n") == parse_line(GOOD)


def test_unknown_tokens_are_ignored():
    r = parse_line(GOOD + " NEWENGINE 123 FUTURE_THING off")
    assert r == parse_line(GOOD)


# ------------------------------------------------------------------------------------------------- summaries

def test_summarize_orin_nano_capture():
    text = (SAMPLES / "orin-nano_jp6.txt").read_text(encoding="utf-8")  # with its '#' header lines
    s = summarize(text, 100)
    vdd_in = [5971, 6011, 6050, 6090, 6130, 6329, 6448, 6488, 21428, 21468, 21468]
    assert s["samples"] == 11 and s["unparsed"] == 0 and s["interval_ms"] == 100
    assert s["duration_s"] == pytest.approx(1.1)
    assert s["first_timestamp"] == "04-19-2026 01:31:10" and s["last_timestamp"] == "04-19-2026 01:32:10"
    assert s["rails_mean_mw"]["VDD_IN"] == pytest.approx(sum(vdd_in) / 11.0)
    assert s["rails_mean_mw"]["VDD_SOC"] == pytest.approx((2308 * 5 + 2348 * 3 + 6012 * 2 + 6051) / 11.0)
    assert s["gpu_load_mean_pct"] == pytest.approx((2 + 4 + 3 + 99 * 3) / 11.0)
    assert s["temps_max_c"]["gpu"] == 58.062 and s["temps_max_c"]["cpu"] == 55.312
    assert s["input_rail"] == "VDD_IN" and s["board_power_source"] == "VDD_IN"
    assert s["board_mean_mw"] == pytest.approx(sum(vdd_in) / 11.0)
    assert "board_energy_mj" not in s  # one energy formula: the benchmark's, from its loop's wall time
    assert energy_per_inference_mj(s["board_mean_mw"], s["duration_s"], 11) == pytest.approx(sum(vdd_in) / 11.0 * 0.1)
    assert json.loads(json.dumps(s)) == s


def test_summarize_agx_orin_sums_rails_and_counts_unparsed():
    lines = _lines("agx-orin_and_thor.txt")[:2] + ["", "# comment", "RAM 12/"]
    s = summarize(lines, 1000)
    assert s["samples"] == 2 and s["unparsed"] == 1 and s["duration_s"] == 2.0
    assert s["input_rail"] is None and s["board_power_source"] == "sum_of_rails"
    assert s["board_mean_mw"] == pytest.approx(((2340 + 390 + 4025 + 301) + (5139 + 3268 + 5500)) / 2.0)
    assert s["rails_mean_mw"]["VDDQ_VDD2_1V8AO"] == 301  # only the 2025 line has it
    assert s["rails_mean_mw"]["VIN_SYS_5V0"] == pytest.approx((4025 + 5500) / 2.0)
    assert s["gpu_load_mean_pct"] == pytest.approx(6.0)


def test_summarize_tx2_file_with_rail_less_and_cut_lines():
    s = summarize(_lines("tx2_jp4.txt"), 1000)
    assert s["samples"] == 6 and s["rails_mean_mw"]["VDD_IN"] == pytest.approx((3140 + 5297) / 2.0)
    assert s["board_mean_mw"] == pytest.approx((3140 + 5297) / 2.0)  # lines without rails do not count as 0 W
    assert s["gpu_load_mean_pct"] == 0


def test_summarize_without_any_valid_line_raises():
    with pytest.raises(ParseError, match="no tegrastats line"):
        summarize(["", "# header only", "   "], 100)
    with pytest.raises(ParseError, match="garbage"):
        summarize("garbage\nmore garbage\n", 100)
    with pytest.raises(ParseError):
        summarize([], 100)


def test_energy_per_inference():
    nano = summarize(_lines("nano_jp4.txt"), 500)
    assert nano["board_mean_mw"] == pytest.approx((2746 + 2980) / 2.0) and nano["duration_s"] == 1.0
    assert energy_per_inference_mj(nano["board_mean_mw"], 2.0, 100) == pytest.approx(2863 * 2.0 / 100)
    assert energy_per_inference_mj(1000, 1.0, 1) == 1000.0
    with pytest.raises(ValueError):
        energy_per_inference_mj(1000, 1.0, 0)
    with pytest.raises(ValueError):
        energy_per_inference_mj(-1, 1.0, 3)


def test_input_rail_takes_any_mapping_or_names():
    assert input_rail({"VDD_IN": 5000.0, "VDD_SOC": 2000.0}) == "VDD_IN"  # power.py passes means
    assert input_rail(["POM_5V_GPU", "POM_5V_IN"]) == "POM_5V_IN"
    assert input_rail({}) is None
    assert board_power_mw({"GPU": 1.5, "CPU": 2}) == (3.5, "sum_of_rails")
