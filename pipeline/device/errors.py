"""One-line errors for what goes wrong with a device: what happened, on which board, what to do.

``DeviceError`` exits with code 5 (README, "Exit codes"); a stage that fails because of the device
reports the same line.
"""

from pipeline.errors import EXIT_DEVICE, DeployError


class DeviceError(DeployError):
    def __init__(self, message):
        super().__init__(message, code=EXIT_DEVICE)


# ssh's own messages (OpenSSH 7.6 on JetPack 4 to 9.x) -> what to do; the first match wins
_SSH = (
    ("Permission denied", "the board refused the key{key}: add its .pub to ~/.ssh/authorized_keys of {user} on "
                          "the board (ssh-copy-id), or set device.identity_file"),
    ("Host key verification failed", "the board's host key is not in known_hosts (or changed): connect once with "
                                     "`ssh -p {port} {dest}` to check and accept it, or set device.known_hosts_file"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "the board's host key changed: check it, then remove the old key "
                                               "with ssh-keygen -R"),
    ("Connection refused", "connection refused: is sshd running on the board, and is device.port ({port}) right?"),
    ("Could not resolve hostname", "cannot resolve device.host {host}: check the name or use the board's IP"),
    ("No route to host", "no route to device.host {host}: is the board on this network?"),
    ("timed out", "connection to {host}:{port} timed out: is the board on and reachable? (device.connect_timeout_s)"),
    ("Network is unreachable", "network unreachable for device.host {host}"),
    ("Identity file", "device.identity_file{key} is not readable: check the path"),
    ("no such identity", "device.identity_file{key} is not readable: check the path"),
    ("bad permissions", "device.identity_file{key} has permissions ssh refuses: chmod 600 it"),
    ("UNPROTECTED PRIVATE KEY", "device.identity_file{key} has permissions ssh refuses: chmod 600 it"),
    ("closed by remote host", "the board closed the connection during {what}: re-run (finished stages are cached)"),
    ("Connection reset", "the connection to the board was reset during {what}: re-run (finished stages are cached)"),
    ("Broken pipe", "lost the connection to the board during {what}: re-run (finished stages are cached)"),
    ("closed", "lost the connection to the board during {what}: re-run (finished stages are cached)"),
)


def classify_ssh_failure(stderr, transport, what):
    """The DeviceError for an ssh/scp exit 255 (or scp failure), from ssh's own message."""
    cfg = transport.cfg
    text = stderr or ""
    fields = {"port": cfg.port, "host": cfg.host, "user": cfg.user or "your user", "dest": transport.destination,
              "what": what, "key": " ({})".format(cfg.identity_file) if cfg.identity_file else ""}
    for needle, advice in _SSH:
        if needle.lower() in text.lower():
            return DeviceError("device {}: {}".format(transport.describe(), advice.format(**fields)))
    last = [line.strip() for line in text.splitlines() if line.strip()]
    if not last:  # ssh killed or its connection dropped without a word
        return DeviceError("device {}: lost the connection during {} (ssh exited 255 without a message); check the "
                           "board and re-run (finished stages are cached)".format(transport.describe(), what))
    return DeviceError("device {}: ssh failed during {}: {}".format(transport.describe(), what, last[-1]))




def agent_failure(answer, where, what):
    """The error for an agent's ``{"ok": false}`` answer: a DeviceError for the device's own state,
    a StageFailed-style code 3 for a build or run that failed on a healthy device."""
    from pipeline.errors import EXIT_STAGE_FAILED

    kind, message = answer.get("kind", "internal"), answer.get("error", "no message")
    line = "device {}: {}: {}".format(where, what, message)
    if kind in ("build-failed", "bad-batch", "bad-model", "tensorrt", "run-failed"):
        return DeployError(line, EXIT_STAGE_FAILED)
    if kind == "internal":
        return DeviceError(line + " (an agent error: please report it)")
    return DeviceError(line)
