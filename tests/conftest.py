import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# TensorFlow start-up chatter off in every test (and in the subprocesses they start).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# deploy check's answer cache off, and never the user's ~/.cache: a test that wants it switches it on with its own
# folder (tests/check/test_check_cache.py); otherwise one test's answer would be another's cache hit
os.environ["DEPLOY_CHECK_CACHE"] = "0"
os.environ["DEPLOY_CHECK_CACHE_DIR"] = tempfile.mkdtemp(prefix="deploy-test-check-cache-")


def pytest_sessionstart(session):
    """deploy's own modules byte-compiled once, before any test starts a ``deploy`` subprocess or a converter
    worker: where PYTHONDONTWRITEBYTECODE is set (this project's machines set it) every one of those processes
    compiled each module it imported again (about 0.2-0.5 s a process, hundreds of processes a run). It writes
    pipeline/**/__pycache__, which git ignores; compileall skips a module whose .pyc is current."""
    import compileall

    compileall.compile_dir(str(ROOT / "pipeline"), quiet=1)


@pytest.fixture(autouse=True)
def _collector_as_found():
    """A command run in this process (cli.main) may leave the garbage collector off, as deploy does for a
    check or diff that ends right after (files.gc_paused(resume=False)): the next test finds it on."""
    import gc

    enabled = gc.isenabled()
    yield
    if enabled and not gc.isenabled():
        gc.enable()


def deploy(*args, cwd=None, env=None, timeout=900):
    """Run the real `deploy` command line in a subprocess; returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *map(str, args)],
        cwd=str(cwd or ROOT), env=full_env, capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture
def cli(capfd, monkeypatch):
    """cli(*args, env=None) -> (returncode, stdout, stderr) of ``pipeline.cli.main`` run in this process, as
    ``deploy()`` runs it in a subprocess: from the repository root, with ``env`` added to os.environ for the
    call only (and whatever main itself sets in os.environ, such as --trust-model's, undone after it); stdout
    and stderr are read at the file descriptors, so what child processes and C libraries write is in them too.
    For tests about a command's answer, not about the process: it spares the interpreter's start, the
    imports and a converter worker of its own (the checks' tf2onnx worker, once started here, is reused)."""
    from types import SimpleNamespace

    from pipeline.cli import main

    def _cli(*args, env=None):
        saved = dict(os.environ)
        capfd.readouterr()  # what the test printed before is not the command's
        with monkeypatch.context() as patch:
            patch.chdir(ROOT)
            for key, value in (env or {}).items():
                patch.setenv(key, str(value))
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:  # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 1
            finally:
                os.environ.clear()
                os.environ.update(saved)
        out = capfd.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return _cli


@pytest.fixture
def write(tmp_path):
    """write("name.yaml", text) -> path of a file in tmp_path."""

    def _write(name, text):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return _write
