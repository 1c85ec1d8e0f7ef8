"""Where the converter workers run: this process's temporary folder, and a pool of workers for a zoo.

    folder = workdir()                      # $TMPDIR/deploy-check-*, locked while this process lives
    sweep(tempfile.gettempdir())            # folders of deploys that were killed: removed (workdir does it)
    run_pool([(key, func, nbytes), ...], on_done=print_verdict)   # func(worker) on every core, within the budget
    workers, budget = plan([nbytes, ...])   # how many workers, and the memory budget (DEPLOY_CHECK_MAX_MB)

A folder holds a lock (``fcntl``) for as long as its deploy lives; the kernel drops it when the
process dies, however it dies, so the next ``workdir()`` of any deploy removes a folder whose lock
it can take. The workers are ``pipeline.check.worker`` processes.

A zoo's memory is bounded by its budget, not by its models: ``DEPLOY_CHECK_MAX_MB``, or by default half of
the memory the machine has available when the zoo starts (WORKER_MB, 1 GB, a worker where that cannot be read). Each
conversion's peak is estimated from the model's size by factors measured on keras.applications models
(``expected_peak``); the pool starts a conversion only when it fits beside those under way, so big models
are converted one at a time while small ones fill the other workers.
"""

import os

TMP_PREFIX = "deploy-check-"
LOCK_NAME = ".lock"

_TMP = []  # [(folder, lock fd)] of this process


def workdir():
    """This process's temporary folder (locked while it lives, removed at exit); folders of dead deploys swept first."""
    if not _TMP:
        import fcntl
        import shutil
        import tempfile

        from pipeline.files import at_exit

        sweep(tempfile.gettempdir())
        path = tempfile.mkdtemp(prefix=TMP_PREFIX)
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _TMP.append((path, fd))

        def remove():
            shutil.rmtree(path, True)
            os.close(fd)
            _TMP.remove((path, fd))

        at_exit(remove)
    return _TMP[0][0]


def sweep(base, min_age=86400.0):
    """Remove ``base``'s deploy-check folders whose deploy is gone: their lock is free (a folder without one,
    from a deploy that died while making it or from a deploy before the lock, once older than ``min_age``
    seconds: such a deploy may still be running).
    Only this user's folders, never through a link. Returns the folders removed."""
    import fcntl
    import shutil
    import stat
    import time

    removed = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(TMP_PREFIX) or any(entry.path == p for p, _ in _TMP):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        try:
            fd = os.open(os.path.join(entry.path, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            if time.time() - st.st_mtime < min_age:
                continue  # being made right now, or an older deploy's, maybe running
            fd = None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its deploy is alive
        finally:
            if fd is not None:
                os.close(fd)
        shutil.rmtree(entry.path, True)
        removed.append(entry.path)
    return removed


def model_bytes(path):
    """The bytes of a model file, or of every file in a SavedModel folder (what a worker will hold)."""
    path = str(path)
    if not os.path.isdir(path):
        try:
            return os.path.getsize(path)
        except OSError:
            return 0
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


MAX_MB_ENV = "DEPLOY_CHECK_MAX_MB"  # the zoo's memory budget in MB (default: memory_budget's)
WORKER_MB = 1024  # the budget a worker where the machine's available memory cannot be read
MEMINFO = "/proc/meminfo"
# Measured (docs/performance.md, "Where a zoo's memory goes"; keras.applications frozen graphs of 10-33 MB, pure-Python
# protobuf, each converted by pipeline.check.tf2onnx_steps, 2026-11-28): a worker holds 565-570 MB once it has imported
# TensorFlow and tf2onnx's converter and 595-602 MB (WORKER_BASE_BYTES) after a conversion, what it frees given
# back; converting a frozen graph of N bytes takes it PEAK_FACTOR * N above that at its peak (grappler's copies
# of the graph; 12.1-15.8x measured over 8 models in 5 runs: DenseNet121 12.2-12.9x, EfficientNetB0 12.3-13.7x,
# MobileNetV3Large 12.1-15.5x, NASNetMobile 13.9-15.3x, MobileNetV2 12.2-15.8x; tf2onnx's from_graph_def as the
# worker called it before: 14.6-20.8x); deploy's own process holds up to PARENT_BYTES while it checks a model that
# landed. So the default 2 GB on two workers converts two graphs at once when they add up to 31 MB or less
# (MobileNetV3Small beside EfficientNetB0, two MobileNetV2), bigger ones one at a time.
WORKER_BASE_BYTES = 600 << 20
PEAK_FACTOR = 16
PARENT_BYTES = 350 << 20


def expected_peak(nbytes):
    """What converting a model of ``nbytes`` adds to a worker's memory at its peak (an estimate from measured factors)."""
    return PEAK_FACTOR * max(0, int(nbytes))


def memory_budget(workers):
    """The memory a zoo of ``workers`` workers may use, in bytes: ``DEPLOY_CHECK_MAX_MB`` if set, else half of what
    the machine has available now (Linux's MemAvailable: a zoo never plans on more than half of what is free), else
    WORKER_MB a worker. Two workers need about 2 GB at most (docs/performance.md), so with 4 GB free both convert
    all the time, and with less the big models wait for each other."""
    from pipeline.errors import DeployError

    value = os.environ.get(MAX_MB_ENV, "").strip()
    if value:
        try:
            mb = float(value)
        except ValueError:
            mb = -1
        if mb <= 0:
            raise DeployError("{}={!r}: expected a number of megabytes above 0 (the zoo's memory budget, e.g. 2048)"
                              .format(MAX_MB_ENV, value))
        return int(mb * (1 << 20))
    try:
        with open(MEMINFO) as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return workers * WORKER_MB << 20


def plan(sizes, workers=None, max_bytes=None):
    """(worker count, memory budget in bytes) for jobs of ``sizes`` bytes: one worker a CPU (or ``workers``), no
    more than jobs, and no more than the budget (``max_bytes``, default ``memory_budget``) holds beside the
    smallest conversion each: a worker waiting for memory would hold its imports in vain."""
    from pipeline.check.background import usable_cpus

    count = max(1, min(len(sizes), workers or usable_cpus()))
    budget = memory_budget(count) if max_bytes is None else max_bytes
    smallest = min(expected_peak(n) for n in sizes) if sizes else 0
    return max(1, min(count, (budget - PARENT_BYTES) // (WORKER_BASE_BYTES + smallest))), budget


def run_pool(jobs, workers=None, on_done=None, max_bytes=None, start_worker=None):
    """``func(worker)`` of each ``(key, func, nbytes)`` in ``jobs`` over ``workers`` worker processes (default:
    the CPUs this process may use), one job a worker at a time; ``on_done(key, value)`` in the caller's thread
    as each job lands (a job's exception is its value). ``nbytes``: the model's size. Returns {key: value}.

    Memory is bounded by the budget, not by the number of jobs: ``max_bytes`` (default ``memory_budget``) holds
    deploy's own process, every worker's imports and the conversions under way, each estimated by
    ``expected_peak(nbytes)``; a job starts only when it fits beside the ones running (a job alone always runs),
    so two big models are converted one after the other and small ones fill the other workers meanwhile.
    After each job the worker gives its freed memory back (``worker.release_memory``); a worker still holding
    more than ``worker.RECYCLE_BYTES`` is replaced by a fresh one. Several jobs (a zoo): the workers use
    pure-Python protobuf whatever the sizes (pipeline.check.worker: tf2onnx's peak falls by a quarter on
    EfficientNetB0, by 70 % on ResNet50). ``start_worker(big)``: makes a worker (default: a Worker process)."""
    import threading

    from pipeline.check.worker import PURE_PROTOBUF_BYTES, RECYCLE_BYTES, Worker

    jobs = list(jobs)
    if not jobs:
        return {}
    big = len(jobs) > 1 or any(nbytes >= PURE_PROTOBUF_BYTES for _, _, nbytes in jobs)
    count, budget = plan([nbytes for _, _, nbytes in jobs], workers, max_bytes)
    room = budget - PARENT_BYTES - count * WORKER_BASE_BYTES  # for the conversions under way
    todo = [(key, func, expected_peak(nbytes)) for key, func, nbytes in jobs]
    running = []  # expected peaks of the jobs under way
    lock = threading.Condition()
    done = []
    if start_worker is None:
        folder = workdir()

        def start_worker(big):
            return Worker(folder, big=big)

    def take():
        """The first job that fits beside those running, or None when none is left; waits while none fits."""
        with lock:
            while todo:
                for i, (_, _, peak) in enumerate(todo):
                    if not running or sum(running) + peak <= room:
                        running.append(peak)
                        return todo.pop(i)
                lock.wait()
            return None

    def serve():  # a worker started here dies with this thread (PR_SET_PDEATHSIG): it is closed before that
        worker = None
        try:
            while True:
                job = take()
                if job is None:
                    return
                key, func, peak = job
                try:
                    if worker is None or not worker.alive:
                        worker = start_worker(big)
                    value = func(worker)
                except Exception as e:  # noqa: BLE001 - handed to the caller, who reports it for that model
                    value = e
                if worker is not None and (not worker.alive or worker.rss > RECYCLE_BYTES):
                    worker.close()
                    worker = None
                with lock:
                    running.remove(peak)
                    done.append((key, value))
                    lock.notify_all()
        finally:
            if worker is not None:
                worker.close()

    threads = [threading.Thread(target=serve, daemon=True, name="deploy-check-worker-{}".format(i))
               for i in range(count)]
    for thread in threads:
        thread.start()
    results = {}
    while len(results) < len(jobs):
        with lock:
            while not done:
                lock.wait()
            landed = list(done)
            del done[:]
        for key, value in landed:
            results[key] = value
            if on_done is not None:
                on_done(key, value)
    for thread in threads:
        thread.join()
    return results
