"""Fuzzing the readers of untrusted input (see tests/fuzz/targets.py and docs/reliability.md).

Every file of the checked-in corpus and of the regressions (inputs that once crashed deploy) is
replayed through its target on every run; the `fuzz`-marked tests run atheris itself for a
bounded, seeded number of inputs (repeatable: the same inputs every run). Longer runs by hand:
`python scripts/fuzz.py readers --seconds 600`.
"""

import subprocess
import sys
from pathlib import Path

import pytest

import targets
from conftest import ROOT

HERE = Path(__file__).resolve().parent
CASES = sorted((kind, path) for kind in targets.TARGETS for folder in ("corpus", "regressions")
               for path in (HERE / folder / kind).glob("*") if path.is_file())


# corpus cases that still crash, each waiting on a fix outside tests/fuzz (strict: the mark must go with the fix)
KNOWN = {}  # corpus cases known to fail, with the reason (strict xfail): none


def _case(kind, path):
    reason = KNOWN.get("{}/{}".format(kind, path.name))
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(kind, path, marks=marks, id="{}/{}/{}".format(kind, path.parent.parent.name, path.name))


@pytest.mark.parametrize("kind, path", [_case(k, p) for k, p in CASES])
def test_replay(kind, path):
    """A DeployError or a result; any other exception fails here (the target asserts one line)."""
    targets.TARGETS[kind](path.read_bytes())


def test_the_runs_corpus_has_every_cause_of_issue_22():
    """Each wrong shape issue 22 reproduced (24 tracebacks in deploy report / compare, 12 causes, and the gate's
    impossible figures) is a corpus case, for report and for compare."""
    names = {p.name for p in (HERE / "corpus" / "runs").glob("*")}
    causes = ("stages_not_objects", "manifest_duration_string", "batch_size_list", "latency_string",
              "percentiles_short", "where_a_string", "iterations_negative", "history_epochs_numbers", "latency_nan",
              "latency_infinite", "latency_negative", "latency_zero", "deployable_no", "benchmark_a_list",
              "results_a_string", "check_newer", "benchmark_newer")
    missing = ["{}_{}".format(c, cmd) for c in causes for cmd in ("report", "compare")
               if "{}_{}".format(c, cmd) not in names]
    assert not missing and {"history_finished_number", "history_latency_nan", "markdown_script_note"} <= names, missing


@pytest.mark.fuzz
@pytest.mark.slow
@pytest.mark.parametrize("kind, runs", [("readers", 20000), ("config", 3000), ("runs", 500), ("agent", 20000),
                                        ("records", 3000), ("bundle", 20000)])
def test_bounded_fuzz_run(kind, runs):
    pytest.importorskip("atheris")
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), kind, "--runs", str(runs), "--seed", "1",
                          "--no-grow"], capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    tail = "\n".join(res.stderr.splitlines()[-40:])
    assert res.returncode == 0, "atheris found a crash (written to tests/fuzz/crashes/):\n" + tail
    assert "Done {} runs".format(runs) in res.stderr, tail


def test_the_corpus_has_every_case_of_issue_29():
    """Numbers that parse but cannot be computed with, and inner types the schemas did not reach (issue 29), for
    report and compare (runs) and for every record kind (records): huge integers, denormals, ±0, 1e308,
    NaN/Infinity, an object where a string belongs and the other way round."""
    runs = {p.name for p in (HERE / "corpus" / "runs").glob("i29_*")}
    for case in ("iterations_huge_compare", "batch_size_huge_compare", "latency_denormal_compare",
                 "latency_denormal_history", "latency_1e308_compare", "latency_negative_zero_report",
                 "std_negative_zero_compare", "run_settings_string_report", "run_settings_engine_string_report",
                 "run_ci_string_report", "gate_rows_figure_list_report", "gate_row_figure_list_report",
                 "gate_k_1e300_report", "history_loss_huge_report"):
        assert "i29_" + case in runs, case
    records = {p.name for p in (HERE / "corpus" / "records").glob("*")}
    from pipeline.records import MODELS

    for kind in MODELS:
        assert "valid_" + kind in records or kind == "estimate", kind
    for key in ("iterations", "batch_size", "p50_ms", "min_ms", "std_ms", "throughput_ips"):
        for value in ("huge_int", "int_1e30", "denormal", "neg_zero", "zero", "e308", "neg_e308", "string", "list",
                      "object", "true", "null"):
            assert "benchmark_{}_{}".format(key, value) in records
    for kind in ("run", "manifest", "benchmark", "check", "rewrite", "conversion", "comparison", "history", "engine"):
        assert any(name.startswith(kind + "_") and not name.startswith("valid") for name in records), kind
