"""Where the converter workers run: this process's temporary folder, and a pool of workers for a zoo.

    folder = workdir()                      # $TMPDIR/deploy-check-*, locked while this process lives
    sweep(tempfile.gettempdir())            # folders of deploys that were killed: removed (workdir does it)
    run_pool([(key, func, nbytes), ...], on_done=print_verdict)   # func(worker) on every core

A folder holds a lock (``fcntl``) for as long as its deploy lives; the kernel drops it when the
process dies, however it dies, so the next ``workdir()`` of any deploy removes a folder whose lock
it can take. The workers are ``pipeline.check.worker`` processes.
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


def run_pool(jobs, workers=None, on_done=None):
    """``func(worker)`` of each ``(key, func, nbytes)`` in ``jobs`` over ``workers`` worker processes (default:
    the CPUs this process may use), one job a worker at a time; ``on_done(key, value)`` in the caller's thread
    as each job lands (a job's exception is its value). ``nbytes``: the model's size. Several jobs (a zoo): the
    workers use pure-Python protobuf whatever the sizes (pipeline.check.worker: tf2onnx's peak falls by a
    quarter on EfficientNetB0, by 70 % on ResNet50; its extra import seconds are paid once a worker, and
    several workers convert at once, so their peaks add up). A worker left holding more than
    worker.RECYCLE_BYTES is replaced: memory is bounded by the number of workers, not of jobs. Returns {key: value}."""
    import queue
    import threading

    from pipeline.check.background import usable_cpus
    from pipeline.check.worker import PURE_PROTOBUF_BYTES, RECYCLE_BYTES, Worker

    jobs = list(jobs)
    if not jobs:
        return {}
    big = len(jobs) > 1 or any(nbytes >= PURE_PROTOBUF_BYTES for _, _, nbytes in jobs)
    todo, done = queue.Queue(), queue.Queue()
    for key, func, _ in jobs:
        todo.put((key, func))
    folder = workdir()

    def serve():  # a worker started here dies with this thread (PR_SET_PDEATHSIG): it is closed before that
        worker = None
        try:
            while True:
                try:
                    key, func = todo.get_nowait()
                except queue.Empty:
                    return
                if worker is None or not worker.alive:
                    worker = Worker(folder, big=big)
                try:
                    value = func(worker)
                except Exception as e:  # noqa: BLE001 - handed to the caller, who reports it for that model
                    value = e
                done.put((key, value))
                if not worker.alive or worker.rss > RECYCLE_BYTES:
                    worker.close()
                    worker = None
        finally:
            if worker is not None:
                worker.close()

    threads = [threading.Thread(target=serve, daemon=True, name="deploy-check-worker-{}".format(i))
               for i in range(max(1, min(len(jobs), workers or usable_cpus())))]
    for thread in threads:
        thread.start()
    results = {}
    for _ in jobs:
        key, value = done.get()
        results[key] = value
        if on_done is not None:
            on_done(key, value)
    for thread in threads:
        thread.join()
    return results
