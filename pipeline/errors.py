"""The one user-facing error type, and the exit codes deploy documents.

A DeployError is printed by ``main()`` on one line, ``deploy: error: <message>``, and the
process exits with its ``code``. Any other exception reaching ``main()`` is a bug in deploy.
"""

# Exit codes (README "Exit codes").
EXIT_OK = 0
EXIT_BAD_INPUT = 1  # bad input: config, file, dataset, flag
EXIT_NOT_DEPLOYABLE = 2  # the model cannot be deployed to the target
EXIT_STAGE_FAILED = 3  # a stage ran and failed (e.g. a numeric check above tolerance)
EXIT_DIFFERENT = 4  # a comparison found a difference (deploy diff: the graphs differ)
EXIT_DEVICE = 5  # the device could not be reached or used (unreachable host, refused key, lost connection, no TensorRT)
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_TERMINATED = 143  # SIGTERM (128 + 15)


class DeployError(Exception):
    """An error the user can act on: what failed, which file/key/node, and what to do."""

    def __init__(self, message, code=EXIT_BAD_INPUT):
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self):
        return self.message


class StageFailed(DeployError):
    """A stage ran and its result failed a check (exit code 3)."""

    def __init__(self, message):
        super().__init__(message, code=EXIT_STAGE_FAILED)
