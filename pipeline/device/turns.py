"""One benchmark at a time on a machine: a benchmark's timed loop and the host work of another run's
benchmark (ONNX Runtime on the accuracy images, the consistency check) must not share the CPU.

The case it exists for is the nightly's "a runner machine that is itself a board": an Orin that runs its
own timed loop (``transport: local``) while also hosting the runners that drive a TX2 and a Nano over
ssh. Every deploy benchmark on the machine -- whatever its route -- takes the machine's benchmark turn
(an exclusive ``flock`` on one file), so they run one after the other; a run that has to wait says so,
with the process holding the turn. What deploy does not run itself (the workflow's installs, pytest) is
the workflow's to keep apart (docs/nightly.md).

The file: ``$DEPLOY_BENCHMARK_LOCK``, else ``/tmp/deploy-benchmark.lock`` (one per machine, for every
user: mode 666); a link, a file with other names (hard links) or anything but a regular file there is
refused, never opened through.
"""

import errno
import os
import stat
import time
from contextlib import contextmanager

from pipeline.device.errors import DeviceError

DEFAULT_PATH = "/tmp/deploy-benchmark.lock"
ENV = "DEPLOY_BENCHMARK_LOCK"


def lock_path():
    return os.environ.get(ENV) or DEFAULT_PATH


def _open(path):
    """A descriptor of the turn file: read-write where this user may write it, else read-only (flock needs neither).
    An existing file is opened without O_CREAT (a sticky /tmp refuses O_CREAT on another user's file under
    fs.protected_regular); a missing one is created with O_EXCL."""
    flags = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        for _ in range(3):
            try:
                try:
                    fd = os.open(path, flags | os.O_RDWR)
                except PermissionError:
                    fd = os.open(path, flags | os.O_RDONLY)
                break
            except FileNotFoundError:
                old = os.umask(0)
                try:
                    fd = os.open(path, flags | os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
                    break
                except FileExistsError:
                    continue  # made by another run meanwhile: open that one
                finally:
                    os.umask(old)
        else:
            raise DeviceError("cannot open {} (the machine's benchmark turn): it keeps appearing and vanishing".format(path))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise DeviceError("{} (the machine's benchmark turn) is a link; deploy does not lock through links: remove it, "
                              "or set {} to a file of your own".format(path, ENV))
        raise DeviceError("cannot open {} (the machine's benchmark turn): {}; set {} to a file deploy can create".format(
            path, e.strerror, ENV))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise DeviceError("{} (the machine's benchmark turn) is not a plain file of its own ({}); remove it, or set {} to "
                          "a file of your own".format(path, "a hard link to another file" if stat.S_ISREG(info.st_mode)
                                                      else "not a regular file", ENV))
    return fd


def _holder(fd):
    try:
        text = os.pread(fd, 200, 0).decode("ascii", "replace").split()
    except OSError:
        return "another process"
    return "process {}".format(text[0]) if text and text[0].isdigit() else "another process"


@contextmanager
def benchmark_turn(log=None, poll_s=0.5):
    """Hold the machine's benchmark turn for the ``with`` block, waiting (and saying so through ``log``) while
    another deploy holds it. Released when the block ends or the process dies (the kernel drops a flock)."""
    import fcntl

    path = lock_path()
    fd = _open(path)
    try:
        said = False
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said and log is not None:
                    log("benchmark: waiting for the machine's benchmark turn ({} holds {}): one benchmark at a time on "
                        "a machine, so no run's host work lands in another's timed loop".format(_holder(fd), path))
                    said = True
                time.sleep(poll_s)
        if said and log is not None:
            log("benchmark: got the machine's benchmark turn after {:.0f} s".format(time.monotonic() - started))
        if os.fstat(fd).st_nlink != 1:  # linked while we waited: write nothing through it
            raise DeviceError("{} (the machine's benchmark turn) gained a second name while deploy waited; remove it".format(
                path))
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, "{}\n".format(os.getpid()).encode(), 0)
        except OSError:
            pass  # read-only (another user's file): the turn holds all the same, unnamed
        yield path
    finally:
        os.close(fd)  # releases the flock
