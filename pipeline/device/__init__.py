"""The device half (issue 11, in progress): what runs on a Jetson and what talks to it.

    pipeline/device/agent/   the board side: Python 3.6+, standard library only (numpy and TensorRT
                             where a board has them, imported inside functions); deploy copies it to
                             the board. Parsers of what Jetson tools print live here, so the agent
                             answers in JSON.

So far: the parsers (trtexec, tegrastats, identity files and commands), each tested on every
captured sample in ``tests/data/device/``. Not yet: the engine build, transports, the agent's
command loop, ``deploy device probe``.
"""
