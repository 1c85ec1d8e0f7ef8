"""pipeline/device/process.py run_command: a command to its end, as subprocess.CompletedProcess, the agent's
progress lines to the transport's log as they come. Host side (not part of the agent)."""

import subprocess
import sys
import types

from pipeline.device.process import run_command

CHILD = ("import sys; sys.stderr.write('deploy-agent: step 1\\nplain error\\n'); sys.stderr.flush(); "
         "sys.stdout.write(sys.stdin.read().upper()); sys.exit(3)")


def _transport(logged):
    return types.SimpleNamespace(log=logged.append, describe=lambda: "this machine")


def test_run_command_returns_a_completed_process():
    logged = []
    argv = [sys.executable, "-c", CHILD]
    result = run_command(argv, b"abc", 60, "a test", _transport(logged), stream=True)
    assert isinstance(result, subprocess.CompletedProcess)
    assert (result.args, result.returncode, result.stdout, result.stderr) == (argv, 3, b"ABC", "plain error")
    assert logged == ["device: step 1"]


def test_without_streaming_the_agent_lines_stay_in_stderr():
    logged = []
    result = run_command([sys.executable, "-c", CHILD], None, 60, "a test", _transport(logged), stream=False)
    assert result.stderr == "deploy-agent: step 1\nplain error" and result.stdout == b"" and logged == []
