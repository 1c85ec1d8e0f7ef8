"""The device agent: runs on the board (Python 3.6 on a TX2/Nano with JetPack 4.6), standard library
only at import time. Nothing here imports ``pipeline`` outside this folder (imports are relative):
the folder is copied to the board alone and run as ``python3 -m deploy_agent``.
``tests/device/test_agent_python36.py`` checks the floor with vermin.
"""

import os
import sys


class ParseError(ValueError):
    """What a tool printed is not what the parser knows: the message names the line and the format expected."""


class AgentError(Exception):
    """A failure the host reports as one line; ``kind`` lets it choose the exit code and advice."""

    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind


class EngineError(Exception):
    """A TensorRT build or run that failed, in one line saying what to do."""


def write_atomic(path, data):
    """Write ``data`` (bytes) to ``path`` through a temporary file and a rename: a half-written engine or
    cache is never left under the real name."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def say(message):
    """A progress line for the host (stderr; the answer alone is on stdout)."""
    sys.stderr.write("deploy-agent: " + message + "\n")
    sys.stderr.flush()
