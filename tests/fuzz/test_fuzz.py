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


@pytest.mark.parametrize("kind, path", CASES, ids=["{}/{}/{}".format(k, p.parent.parent.name, p.name) for k, p in CASES])
def test_replay(kind, path):
    """A DeployError or a result; any other exception fails here (the target asserts one line)."""
    targets.TARGETS[kind](path.read_bytes())


@pytest.mark.fuzz
@pytest.mark.slow
@pytest.mark.parametrize("kind, runs", [("readers", 20000), ("config", 3000)])
def test_bounded_fuzz_run(kind, runs):
    pytest.importorskip("atheris")
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), kind, "--runs", str(runs), "--seed", "1",
                          "--no-grow"], capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    tail = "\n".join(res.stderr.splitlines()[-40:])
    assert res.returncode == 0, "atheris found a crash (written to tests/fuzz/crashes/):\n" + tail
    assert "Done {} runs".format(runs) in res.stderr, tail
