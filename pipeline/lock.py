"""One run at a time per run directory.

The lock is an ``fcntl`` lock on ``<run dir>/.lock``, which holds the owner's pid. The kernel drops
the lock when its process dies, so a lock file left by a dead process is simply taken over.
"""

import fcntl
import os
import stat

from pipeline.errors import DeployError
from pipeline.files import kind_of, refuse_link


class RunLock:
    def __init__(self, run_dir):
        self.path = os.path.join(str(run_dir), ".lock")
        self._fd = None

    def acquire(self):
        refuse_link(self.path)
        try:  # O_NOFOLLOW: a link made between the check and the open is refused too (ELOOP); O_NONBLOCK: a FIFO
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as e:  # a directory named .lock, a read-only folder, a link
            raise DeployError("cannot lock {} ({}); remove it, or check the run folder's permissions".format(
                self.path, e.strerror or e))
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            # a hard link to a file outside the run folder (the symlink checks do not see one), or a FIFO or device
            # by this name: deploy would empty it and write its pid into it; it never writes through either
            os.close(fd)
            raise DeployError("cannot lock {}: it is {}; deploy does not write through it (the other name's file "
                              "would be emptied): remove {} and re-run".format(
                                  self.path, "a hard link ({} names for one file)".format(st.st_nlink)
                                  if stat.S_ISREG(st.st_mode) else kind_of(st.st_mode), self.path))
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


class wait_for_lock:
    """A blocking ``flock`` on ``path`` (created if missing): for work several runs share, such
    as generating one dataset. ``message`` is logged when another process holds it."""

    def __init__(self, path, progress=None, message=None):
        self.path, self.progress, self.message, self._fd = str(path), progress, message, None

    def __enter__(self):
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DeployError("cannot lock {} ({}); remove it, or check the folder's permissions".format(
                self.path, e.strerror or e))
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if self.progress is not None and self.message:
                self.progress.log(self.message)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
