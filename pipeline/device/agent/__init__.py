"""The device agent: runs on the board (Python 3.6 on a TX2/Nano with JetPack 4.6), standard library
only at import time. Nothing here imports ``pipeline`` outside ``pipeline.device.agent``: the
folder is copied to the board alone. ``tests/device/test_agent_python36.py`` checks the floor with vermin.
"""


class ParseError(ValueError):
    """What a tool printed is not what the parser knows: the message names the line and the format expected."""
