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


TINY_SETS = ("model.input_size=32", "stages.train.epochs=1", "stages.train.batch_size=8", "stages.train.run_eagerly=true",
             "stages.convert.compare_samples=4",
             "stages.benchmark.warmup=2", "stages.benchmark.iterations=5", "stages.benchmark.batch_sizes=[1, 4]")


def tiny_args(root, *extra):
    """The ``--set`` arguments that shrink the shipped TX2 config to the tiny run: runs under root/runs, the
    dataset root/data (generate_shapes: 32 px, 6 + 2 images a class), one epoch, a few benchmark iterations;
    ``extra`` ("key=value") after them."""
    args = []
    for s in ("run.dir={}".format(root / "runs"), "dataset.path={}".format(root / "data"), *TINY_SETS, *extra):
        args += ["--set", s]
    return args


@pytest.fixture(scope="session")
def tiny_tx2(tmp_path_factory):
    """The shipped TX2 config shrunk with tiny_args, run once for the whole session through the real command
    line (``deploy run configs/jetson_tx2.yaml ... --json``, every stage ran): root (data/ and runs/), run
    (runs/jetson_tx2) and result (its CompletedProcess). tests/test_end_to_end.py asserts on this run itself;
    a test about a later stage that needs this trained, exported and frozen model starts from copies of its
    stage folders (copy_stages) in a run of its own, as the nightly's host job does, and deploy's cache keys
    decide that they are up to date (same model, dataset path and files, training). Nothing may write to it
    but tests/test_end_to_end.py, whose re-runs give the same bytes."""
    from types import SimpleNamespace

    from pipeline.data.shapes import generate_shapes

    root = tmp_path_factory.mktemp("tiny_tx2")
    generate_shapes(root / "data", image_size=32, train_per_class=6, val_per_class=2)
    result = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *tiny_args(root), "--json")
    return SimpleNamespace(root=root, data=root / "data", run=root / "runs" / "jetson_tx2", result=result)


def copy_stages(tiny, run, stages):
    """Copies of the tiny_tx2 run's stage folders (cp -a: times kept) into the run folder ``run``; fails the
    test when the shared run itself failed."""
    assert tiny.result.returncode == 0, "the shared tiny run failed:\n" + tiny.result.stderr[-3000:]
    Path(run).mkdir(parents=True, exist_ok=True)
    for stage in stages:
        subprocess.run(["cp", "-a", str(tiny.run / stage), str(Path(run) / stage)], check=True)
