"""A device is a value (issue 27, item 7): ``open_device(config)`` gives a Device that whoever opened it passes on
and closes -- no registry of open devices in a module, no read of the config's private fields. The folder a
relative ``device.python`` counts from comes from the config's public ``where``."""

import sys
from pathlib import Path

from pipeline.config import load_config
from pipeline.device.client import open_device, python_for

from conftest import ROOT


class PublicOnly(object):
    """The config as a library outside pipeline.config may see it: its public attributes; a private one is an
    error here."""

    def __init__(self, config):
        self._config = config

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AssertionError("read the config's private {}".format(name))
        return getattr(self._config, name)


def _config(folder, lines, base=None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "board.yaml"
    path.write_text("extends: {}\n{}".format(base or ROOT / "configs" / "jetson_tx2.yaml", lines))
    return path


def _agent(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\nexec "{}" "$@"\n'.format(sys.executable))
    path.chmod(0o755)
    return path


def test_a_relative_python_counts_from_the_file_that_sets_it_through_public_fields(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = _config(tmp_path / "base", "device:\n  transport: local\n  python: tools/agent\n  work_dir: {}\n".format(
        tmp_path / "w"))
    child = _config(tmp_path / "project", "run:\n  name: child\n", base=base)  # the key is in the base file
    agent = _agent(tmp_path / "base" / "tools" / "agent")
    assert python_for(PublicOnly(load_config(child))) == str(agent)
    here = _agent(tmp_path / "tools" / "agent")  # --set: the current folder counts
    assert python_for(PublicOnly(load_config(child, ["device.python=tools/agent"]))) == str(here)


def test_each_open_device_is_its_own_value_and_closes_its_own_agent(tmp_path):
    config = load_config(_config(tmp_path, "device:\n  transport: local\n  python: {}\n  work_dir: {}\n".format(
        sys.executable, tmp_path / "w")))
    with open_device(config) as first, open_device(config) as second:
        assert first is not second
        assert first.ping()["protocol"] == second.ping()["protocol"]
        agent = first.transport._agent.proc
        second.close()
        assert second.transport._agent is None and agent.poll() is None  # the other's agent serves on
    assert first.transport._agent is None and agent.poll() is not None  # closed when its block ended
