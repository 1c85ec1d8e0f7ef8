"""The device agent: runs on the board (Python 3.6 on a TX2/Nano with JetPack 4.6), standard library
only at import time. Nothing here imports ``pipeline`` outside this folder (imports are relative):
the folder is copied to the board alone and run as ``python3 -m deploy_agent``.
``tests/device/test_agent_python36.py`` checks the floor with vermin.
"""

import sys


class ParseError(ValueError):
    """What a tool printed is not what the parser knows: the message names the line and the format expected."""


class AgentError(Exception):
    """A failure the host reports as one line; ``kind`` lets it choose the exit code and advice."""

    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind


def say(message):
    """A progress line for the host (stderr; the answer alone is on stdout)."""
    sys.stderr.write("deploy-agent: " + message + "\n")
    sys.stderr.flush()
