import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# TensorFlow start-up chatter off in every test (and in the subprocesses they start).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def deploy(*args, cwd=None, env=None, timeout=900):
    """Run the real `deploy` command line in a subprocess; returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *map(str, args)],
        cwd=str(cwd or ROOT), env=full_env, capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture
def write(tmp_path):
    """write("name.yaml", text) -> path of a file in tmp_path."""

    def _write(name, text):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return _write
