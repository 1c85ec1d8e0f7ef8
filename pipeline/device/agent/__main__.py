"""``python3 -m <agent>``: one JSON request on stdin, one JSON answer on stdout; with ``--serve``, one
request per line and one answer line each, until stdin closes (the host keeps one agent per run).

    request:  {"command": "ping" | "probe" | "benchmark" | "infer" | "build" | "build_uff", ...}
    answer:   {"ok": true, "result": {...}}  or  {"ok": false, "kind": "...", "error": "one line"}

Progress goes to stderr as lines starting with ``deploy-agent: `` (the host shows them). The exit
code is 0 whenever an answer was written, so the host can tell an agent's answer from a failure of
the transport (ssh exits 255, a missing interpreter 127).

The answers have a channel of their own: at start the agent keeps a private duplicate of fd 1 for
them and points fd 1 (and ``sys.stdout``) at stderr. Whatever a library prints -- a Python ``print``
(NVIDIA's uff converter prints its TensorFlow-version notes), a C/C++ ``write(1, ...)`` (TensorRT's
logger, CUDA) or a child process -- lands on stderr, never in the answer stream the host reads.
"""

import os
import platform

# Before anything imports numpy: numpy 1.19.5's aarch64 wheel bundles an OpenBLAS whose CPU detection dies
# with SIGILL on Jetson (TX2, Nano: numpy/numpy#18131); ARMV8 skips the detection. A value the user set wins.
if platform.machine() == "aarch64":
    os.environ.setdefault("OPENBLAS_CORETYPE", "ARMV8")

import json  # noqa: E402
import sys  # noqa: E402

from . import AgentError, commands  # noqa: E402


def protocol_stream():
    """The answers' stream: a duplicate of fd 1 kept for the agent alone; fd 1 and ``sys.stdout`` then
    go to stderr, so no library and no child process can write into the protocol."""
    sys.stdout.flush()
    stream = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def main():
    out = protocol_stream()
    if "--serve" in sys.argv[1:]:
        for line in iter(sys.stdin.readline, ""):
            if line.strip():
                _answer(line, out)
    else:
        _answer(sys.stdin.read() or "{}", out)


def _answer(text, out):
    try:
        request = json.loads(text)
        if not isinstance(request, dict):
            raise AgentError("bad-request", "the request is not a JSON object")
        answer = {"ok": True, "result": commands.dispatch(request)}
    except AgentError as e:
        answer = {"ok": False, "kind": e.kind, "error": str(e)}
    except ValueError as e:  # json, and parsers' ParseError
        answer = {"ok": False, "kind": "bad-request", "error": " ".join(str(e).split())}
    except MemoryError:
        answer = {"ok": False, "kind": "out-of-memory", "error": "the board ran out of memory; lower the batch sizes"}
    except Exception as e:  # an agent bug or a library's failure: one line, never a traceback on the host
        answer = {"ok": False, "kind": "internal", "error": "{}: {}".format(type(e).__name__, " ".join(str(e).split()))}
    out.write(json.dumps(answer, sort_keys=True) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
