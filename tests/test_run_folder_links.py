"""Nothing deploy writes, prunes, truncates or locks in a run folder is reached through a symbolic
link (run folders travel as tar archives and live in shared runs/ folders): a link where deploy
writes is refused with a line naming it, and the file or folder it points at is left as it was."""

import os

import pytest

from pipeline.errors import DeployError
from pipeline.lock import RunLock
from pipeline.report import write_report

from conftest import deploy
from reportkit import make_run


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(precious, run / ".lock")
    with pytest.raises(DeployError, match=r"\.lock is a symbolic link"):
        RunLock(run).acquire()
    assert precious.read_text() == "keep me\n"


def test_a_dangling_lock_link_creates_nothing_at_its_target(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(tmp_path / "elsewhere.lock", run / ".lock")
    with pytest.raises(DeployError, match="symbolic link"):
        RunLock(run).acquire()
    assert not (tmp_path / "elsewhere.lock").exists()


def test_a_lock_file_hard_linked_to_an_outside_file_is_refused_and_the_file_kept(tmp_path):
    """Issue 29: a hard link is not a symlink: the lock opened it read-write and emptied the outside file."""
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    os.link(str(precious), str(run / ".lock"))
    with pytest.raises(DeployError, match=r"cannot lock .*\.lock: it is a hard link \(2 names for one file\)"):
        RunLock(run).acquire()
    assert precious.read_text() == "keep me\n"


def test_a_lock_file_that_is_a_named_pipe_is_refused_at_once(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(str(run / ".lock"))
    with pytest.raises(DeployError, match=r"\.lock: it is a named pipe \(FIFO\)"):
        RunLock(run).acquire()


def test_deploy_run_leaves_a_hard_linked_outside_file_as_it_was(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    config = tmp_path / "c.yaml"
    config.write_text("run: {{name: t, dir: {}}}\ntarget: host_cpu\nmodel: {{zoo: small_cnn, input_size: 32}}\n"
                      "stages: {{train: {{epochs: 1}}}}\ndataset: {{path: {}, generate: shapes}}\n".format(
                          tmp_path / "runs", tmp_path / "data"))
    (tmp_path / "runs" / "t").mkdir(parents=True)
    os.link(str(precious), str(tmp_path / "runs" / "t" / ".lock"))
    res = deploy("run", config, "--quiet", timeout=300)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "hard link" in res.stderr.strip().splitlines()[-1] and precious.read_text() == "keep me\n"


def test_a_plot_cache_that_is_a_link_is_refused_and_the_folder_it_points_at_untouched(tmp_path):
    other = tmp_path / "someone-elses-plots"
    other.mkdir()
    old = other / "figure.svg"
    old.write_text("<svg/>")
    os.utime(old, (1, 1))  # older than any report: prune() would have removed it
    run = make_run(tmp_path / "runs" / "tx2")
    os.symlink(other, run / ".report")
    with pytest.raises(DeployError, match=r"\.report is a symbolic link"):
        write_report(run)
    assert sorted(p.name for p in other.iterdir()) == ["figure.svg"]
    assert not (run / "report.html").exists()


def test_deploy_report_says_so_in_one_line(tmp_path):
    other = tmp_path / "plots"
    other.mkdir()
    run = make_run(tmp_path / "runs" / "tx2")
    os.symlink(other, run / ".report")
    res = deploy("report", run)
    assert res.returncode == 1, res.stderr
    assert "symbolic link" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert list(other.iterdir()) == []


def test_a_stage_folder_or_leftover_that_is_a_link_is_replaced_not_followed(tmp_path):
    """The runner swaps a finished stage into <run>/<stage> and removes the old one, and cleans .tmp-* and
    .old-* leftovers: where any of those is a link, the link goes and what it points at stays."""
    from pipeline.runner import _clean_stale, _swap_into_place

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine\n")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(elsewhere, run / "train")
    os.symlink(elsewhere, run / ".tmp-export-1")
    os.symlink(elsewhere, run / ".old-freeze-1")
    _clean_stale(run)
    fresh = run / ".tmp-train-2"
    fresh.mkdir()
    (fresh / "model.keras").write_text("new")
    _swap_into_place(fresh, run / "train")
    assert (run / "train").is_dir() and not (run / "train").is_symlink()
    assert (run / "train" / "model.keras").read_text() == "new"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert (elsewhere / "keep.txt").read_text() == "mine\n"
