"""Work that runs beside the check in a forked child, when that pays.

The TF-TRT share of a 200,000-node graph is about a second of pure Python that needs nothing else
the check computes; on a machine with a free core it runs while the other routes are checked:

    pending = start(conv_flops, graph, nodes=len(graph.nodes))   # forked when it pays, else computed now
    flops = pending.result()                                     # the same value either way
    pending.close()                                              # (in a finally) never leaves a child behind
    child = fork(work, path)       # a child or None: for work only worth doing beside the caller's

It forks only where that is safe and useful: ``os.fork`` exists, at least two CPUs are this process's
to use, no other thread runs (a forked copy of a thread pool, TensorFlow's above all, can deadlock),
TensorFlow is not imported, the graph is big (``MIN_NODES``), and ``DEPLOY_CHECK_FORK`` is not
``0``. The child only computes and sends the pickled result back through a pipe; if it fails in any
way the parent computes the value itself, so an error surfaces exactly as it would without a child.
"""

import os
import pickle
import sys

MIN_NODES = 50_000  # below this, the fork's own cost (a few ms per 100 MB held) is not won back
EARLY_BYTES = 32 << 20  # a frozen graph file this big: its child reads it too (check_model, before reading)
EARLY_MEMORY = 4  # ... when MemAvailable holds this many times the file (the child's parsed copy is about 2.5x)
ENV = "DEPLOY_CHECK_FORK"


def worth_forking(nodes):
    """Whether ``start`` would fork for a graph of ``nodes`` nodes on this machine, now."""
    return nodes >= MIN_NODES and can_fork()


def can_fork():
    """Whether forking is safe and useful in this process, now (see the module's doc)."""
    if not hasattr(os, "fork") or os.environ.get(ENV, "1") == "0" or "tensorflow" in sys.modules:
        return False
    import threading

    if threading.active_count() > 1:
        return False
    return usable_cpus() >= 2


def usable_cpus():
    """The CPUs this process may run on (its affinity where the OS says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_allows(nbytes):
    """Whether this machine has ``nbytes`` more memory available now (Linux's MemAvailable; elsewhere
    unknown, so no): a child that reads a big graph again holds a second copy of it."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 >= nbytes
    except (OSError, ValueError, IndexError):
        pass
    return False


_RECOMPUTE = object()


def start(func, *args, nodes=0, on_failure=_RECOMPUTE):
    """``func(*args)`` in a forked child when ``worth_forking(nodes)``, else right now (see ``fork``)."""
    child = fork(func, *args, on_failure=on_failure) if nodes >= MIN_NODES else None
    return child if child is not None else _Done(func(*args))


def fork(func, *args, on_failure=_RECOMPUTE):
    """``func(*args)`` in a forked child when ``can_fork()``, else None (nothing computed). A child that
    fails is computed again here, or answers ``on_failure`` when given (a value the caller can do
    without: check_model's second reading of a file is never repeated here)."""
    if not can_fork():
        return None
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: compute, send, leave without running the parent's exit handlers
        import gc

        gc.disable()  # one computation and out: cyclic GC passes over a big graph only cost time
        status = 1
        try:
            from pipeline.files import die_with_parent

            die_with_parent()  # a `kill -9` of deploy leaves no child computing on
            os.close(read_fd)
            data = pickle.dumps(func(*args), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
            status = 0
        except BaseException:  # noqa: B902 - anything: the parent computes it again and raises it there
            pass
        finally:
            os._exit(status)
    os.close(write_fd)
    return _Child(pid, read_fd, func, args, on_failure)


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value

    def close(self):
        pass


class _Child:
    def __init__(self, pid, read_fd, func, args, on_failure=_RECOMPUTE):
        self.pid, self.read_fd, self.func, self.args, self.on_failure = pid, read_fd, func, args, on_failure

    def result(self):
        chunks = []
        with os.fdopen(self.read_fd, "rb") as pipe:
            self.read_fd = None
            for chunk in iter(lambda: pipe.read(1 << 16), b""):
                chunks.append(chunk)
        status = self._reap()
        if status == 0:
            try:
                return pickle.loads(b"".join(chunks))
            except Exception:  # noqa: B902 - a truncated answer: compute it here
                pass
        if self.on_failure is not _RECOMPUTE:
            return self.on_failure
        return self.func(*self.args)

    def close(self):
        """Stop and reap a child whose result was not asked for (the check failed meanwhile)."""
        if self.read_fd is not None:
            os.close(self.read_fd)
            self.read_fd = None
        if self.pid is not None:
            import signal

            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._reap()

    def _reap(self):
        pid, self.pid = self.pid, None
        if pid is None:
            return None
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return None
        return os.waitstatus_to_exitcode(status)
