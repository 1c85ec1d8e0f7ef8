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
@pytest.mark.parametrize("kind, runs", [("readers", 20000), ("config", 3000), ("runs", 500), ("agent", 20000)])
def test_bounded_fuzz_run(kind, runs):
    pytest.importorskip("atheris")
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), kind, "--runs", str(runs), "--seed", "1",
                          "--no-grow"], capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    tail = "\n".join(res.stderr.splitlines()[-40:])
    assert res.returncode == 0, "atheris found a crash (written to tests/fuzz/crashes/):\n" + tail
    assert "Done {} runs".format(runs) in res.stderr, tail
