"""One run at a time per run directory.

The lock is an ``fcntl`` lock on ``<run dir>/.lock``, which holds the owner's pid. The kernel drops
the lock when its process dies, so a lock file left by a dead process is simply taken over.
"""

import fcntl
import os

from pipeline.errors import DeployError


class RunLock:
    def __init__(self, run_dir):
        self.path = os.path.join(str(run_dir), ".lock")
        self._fd = None

    def acquire(self):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DeployError(
                "{} is locked by another deploy run (pid {}); wait for it to finish or stop it".format(
                    os.path.dirname(self.path), holder
                )
            )
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self):
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
