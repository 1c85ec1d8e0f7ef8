"""The device half: what runs on a Jetson and what talks to it (docs/device.md).

    pipeline/device/agent/   the board side, copied there and run as ``python3 -m deploy_agent``:
                             Python 3.6+, standard library at import time (numpy, onnxruntime and
                             TensorRT imported inside functions where a command needs them), relative
                             imports only. JSON in, JSON out.
    transport.py             local | ssh: the agent's folder on the device, content-addressed sends,
                             fetches, one serving agent process per run
    client.py                the Device: ping, probe, which backend, the TensorRT version check
    errors.py                one-line DeviceErrors (exit code 5) from ssh's and the agent's failures
    engine.py benchmark.py   what the engine and benchmark stages ask of the device
    identify.py              ``deploy device probe``: the board's identity and the target file it matches
"""
