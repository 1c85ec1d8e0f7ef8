"""Small shared helpers: content hashes of files and directories, atomic writes, the paused garbage
collector, a child that dies with its parent, the installed packages' versions read from their folders, and the model
files deploy run starts from."""

import contextlib
import functools
import gc
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

from pipeline.errors import DeployError

_CHUNK = 1 << 20


@functools.lru_cache(maxsize=None)
def installed_versions():
    """{distribution name as distribution_name() spells it: version} from the ``NAME-VERSION.dist-info`` /
    ``.egg-info`` folders on sys.path (the first on sys.path wins, as for imports): importlib.metadata's answer
    without importing it and the email parser it reads METADATA with (45 ms; a third of a check-cache hit on a
    loaded machine). Read once per process (``installed_versions.cache_clear()`` after an install)."""
    import sys

    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if folder.endswith((".dist-info", ".egg-info")) and "-" in folder:
                name, _, rest = folder.rpartition(".")[0].partition("-")
                found.setdefault(distribution_name(name), rest.split("-")[0])
    return found


def touch(path):
    """Set ``path``'s modification time to now (a cache entry just used); quietly nothing where it cannot be
    (a read-only cache, an entry removed meanwhile)."""
    try:
        os.utime(str(path))
    except OSError:
        pass


def distribution_name(name):
    """A distribution's name normalised (PEP 503, with "_"): ``tensorflow-cpu`` and ``TensorFlow_CPU`` alike."""
    import re

    return re.sub(r"[-_.]+", "_", name).lower()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def sha256_path(path):
    """sha256 of a file, or of a directory tree (relative paths and file hashes, sorted)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(file.relative_to(path).as_posix().encode())
        h.update(b"\0")
        h.update(sha256_file(file).encode())
        h.update(b"\n")
    return h.hexdigest()


def stat_signature(path):
    """What changes when a file or tree is touched: (relative path, size, mtime_ns, inode) of every
    file, hashed. Equal signatures let a cache trust a recorded sha256 without reading the bytes
    (DVC's fast path); a different one means: hash again."""
    path = Path(path)
    h = hashlib.sha256()
    entries = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in entries:
        st = file.stat()
        h.update("{}\0{}\0{}\0{}\n".format(file.relative_to(path).as_posix() if file != path else "",
                                             st.st_size, st.st_mtime_ns, st.st_ino).encode())
    return h.hexdigest()


def size_of(path):
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_text(path, text):
    """Write a text file atomically (temp file in the same directory, then rename)."""
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path, data):
    """Write a file atomically (temp file in the same directory, then rename)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", dir=str(path.parent.resolve()))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; the file gets what open() would give
        os.replace(tmp, str(path))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_UMASK = []


def umask():
    """The process umask (read once: os.umask can only be read by setting it)."""
    if not _UMASK:
        mask = os.umask(0o022)
        os.umask(mask)
        _UMASK.append(mask)
    return _UMASK[0]


def refuse_link(path):
    """A DeployError when ``path`` is a symbolic link: deploy never follows a link where it writes,
    deletes, truncates or locks inside a run folder (run folders travel as tar archives and live in
    shared folders; a link there could point anywhere)."""
    if os.path.islink(str(path)):
        raise DeployError("{} is a symbolic link (to {}); deploy does not follow links where it writes in a run "
                          "folder: remove the link and re-run".format(path, os.readlink(str(path))))


# --- what deploy reads: regular files only, of a size within the limit for their kind

MODEL_BYTES = 2 << 30  # a protobuf model (.pb, .pbtxt, .meta, .onnx, saved_model.pb): protobuf parses at most 2 GiB
KERAS_BYTES = 16 << 30  # a .keras / .h5 file (HDF5 has no such limit; weights beyond this are no edge model)
RECORD_BYTES = 256 << 20  # a JSON file of a run folder (check.json of a 200,000-node graph is a few MB)
SIDE_FILE_BYTES = 16 << 20  # a small file beside a model (io.json)

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a regular file"))


def kind_of(mode):
    """"a regular file", "a directory", "a named pipe (FIFO)", "a character device", ... of an ``st_mode``."""
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def check_regular(path, what, limit=None, directory_ok=False):
    """The ``os.stat`` of ``path`` (links followed) when it is a regular file of at most ``limit`` bytes (or,
    with ``directory_ok``, a directory), else one DeployError naming it and what it is. Nothing is opened:
    a named pipe, a device or a socket (or a link to one) is refused at once, where reading it would wait
    forever (a FIFO) or never end (/dev/zero). FileNotFoundError propagates."""
    st = os.stat(str(path))
    if stat.S_ISREG(st.st_mode) or (directory_ok and stat.S_ISDIR(st.st_mode)):
        if limit is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise DeployError("{}: {} bytes, more than {} may hold ({} bytes); this is not {}".format(
                path, st.st_size, what, limit, what))
        return st
    raise DeployError("{}{}: {}, not a regular file; deploy reads {} only from a regular file{}".format(
        path, " (a link to {})".format(os.path.realpath(str(path))) if os.path.islink(str(path)) else "",
        kind_of(st.st_mode), what, " or a directory" if directory_ok else ""))


def open_regular(path, what, limit):
    """``path`` opened for reading in binary, refused (one DeployError) unless it is a regular file of at most
    ``limit`` bytes. Opened without blocking (a FIFO put there after a check would otherwise hang the open)
    and checked on the open file itself, so a file swapped in between is checked too. OSError propagates."""
    check_regular(path, what, limit)  # names a socket or a folder too, which open() would refuse with a bare errno
    fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):  # swapped in after the check: fdopen would raise IsADirectoryError
        os.close(fd)
        raise DeployError("{}: a directory, not a regular file; deploy reads {} only from a regular file".format(path, what))
    handle = os.fdopen(fd, "rb")
    try:
        if not stat.S_ISREG(st.st_mode):
            raise DeployError("{}: {}, not a regular file; deploy reads {} only from a regular file".format(
                path, kind_of(st.st_mode), what))
        if st.st_size > limit:
            raise DeployError("{}: {} bytes, more than {} may hold ({} bytes); this is not {}".format(
                path, st.st_size, what, limit, what))
    except BaseException:
        handle.close()
        raise
    return handle


def read_regular(path, what, limit):
    """The bytes of ``path`` (``open_regular``'s checks), at most ``limit`` of them: read as the size the file
    says (no buffer of ``limit`` bytes is allocated), then on while it grows."""
    parts, total = [], 0
    with open_regular(path, what, limit) as handle:
        size = os.fstat(handle.fileno()).st_size
        while True:
            chunk = handle.read(size + 1 if not parts else _CHUNK)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while it was read
                raise DeployError("{}: more than {} bytes, more than {} may hold".format(path, limit, what))
    return b"".join(parts)


def write_json(path, data, final_newline=True):
    """Write JSON atomically (indented, keys sorted): the one JSON writer of deploy's files. Stage outputs
    written before this writer existed keep their bytes (their sha256 is in manifests and cache keys):
    ``final_newline=False`` for the freeze and rewrite stages' io.json and the export stage's signature.json."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + ("\n" if final_newline else ""))


@contextlib.contextmanager
def gc_paused(pause=True, resume=True):
    """Python's cyclic garbage collector off for a block (on again after, if it was on): reading a big graph
    builds millions of long-lived objects without cycles, and TensorFlow's tracing, loading and freezing make
    many short-lived ones; the collector's full passes over them only cost time (1.5-2 s of a run, several
    times the reading of a 200,000-node graph). ``resume=False``: left off after the block, for a command
    that ends right after it (``outlive``): the first collection after turning it on again walks every
    object the block made (0.3 s after reading a 200,000-node graph)."""
    enabled = pause and gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled and resume:
            gc.enable()


_AT_EXIT = []


def at_exit(func, *args):
    """Call ``func(*args)`` when the process ends, in the reverse order of registration: through
    ``atexit`` normally, and before ``pipeline.cli.entry``'s fast exit (which skips ``atexit``):
    temporary folders, open device connections."""
    import atexit

    if not _AT_EXIT:
        atexit.register(run_at_exit)
    _AT_EXIT.append((func, args))


def run_at_exit():
    """What ``at_exit`` registered, once (later calls find nothing left); one failing call does not stop the rest."""
    while _AT_EXIT:
        func, args = _AT_EXIT.pop()
        try:
            func(*args)
        except Exception:  # noqa: B902 - exit-time cleanup: nothing left to report to
            pass


_OUTLIVE = []


def outlive(obj):
    """Keep ``obj`` (a big graph a command has finished with) alive until the process ends, and
    let ``deploy`` exit without freeing it object by object (0.2-0.4 s for 200,000 nodes): see
    ``pipeline.cli.entry``. One slot: the object kept before is let go (a zoo check frees each
    model but the last)."""
    _OUTLIVE[:] = [obj]


def outlived():
    """Whether something waits for the process's end (``outlive``)."""
    return bool(_OUTLIVE)


def die_with_parent():
    """preexec_fn for a child process: on Linux, the kernel sends it SIGKILL when its parent dies
    (prctl PR_SET_PDEATHSIG), so a `kill -9` of deploy leaves no child behind. Elsewhere a no-op."""
    import ctypes
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass


def onnx_file(path):
    """The .onnx file of the convert stage's artifact (the file itself, or the one inside a directory)."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.onnx"))
        if len(found) != 1:
            raise DeployError("expected one .onnx file in {}, found {}".format(path, len(found)))
        return found[0]
    return path


# --- the model files deploy run starts from (model.source): pipeline.stages.source_artifacts

SOURCE_KINDS = "a .keras/.h5 file, a SavedModel directory or a frozen .pb"
# where JetPack installs trtexec (not on PATH on a stock board); the agent's own copy: device/agent/trtexec_build.py
TRTEXEC = "/usr/src/tensorrt/bin/trtexec"
# an engine built by hand as deploy's engine stage builds it by default (stages.engine.precision: fp16)
TRTEXEC_BUILD = TRTEXEC + " --onnx={onnx} --saveEngine={engine} --fp16"
SOURCE_SUFFIXES = {".keras": "keras_model", ".h5": "keras_model", ".pb": "frozen_graph", ".pbtxt": "frozen_graph"}
# model files deploy check reads that are not a start of the pipeline: (what it is, what to do instead)
NOT_A_START = {
    ".onnx": ("an ONNX model", "build its engine on the board: " + TRTEXEC_BUILD.format(onnx="{path}",
                                                                                         engine="{stem}.engine")),
    ".meta": ("a TF1 meta graph", "freeze it with its checkpoint (tf.compat.v1.graph_util."
                                  "convert_variables_to_constants) and give the frozen .pb"),
}


def source_problem(source):
    """Why ``deploy run`` (its ``model.source``) cannot start from the model at ``source``: the words after
    "model.source: SOURCE", or None. An ONNX model and a TF1 meta graph are checked by ``deploy check`` but are not a start of the pipeline."""
    path = Path(source)
    if not path.exists():
        return "not found"
    if path.is_dir():
        return None if (path / "saved_model.pb").exists() else \
            "is a directory without saved_model.pb; give {}".format(SOURCE_KINDS)
    suffix = path.suffix.lower()
    if suffix in SOURCE_SUFFIXES:
        return None
    if suffix in NOT_A_START:
        what, todo = NOT_A_START[suffix]
        return "is {}: deploy run starts from {}; {}".format(what, SOURCE_KINDS, todo.format(path=source, stem=path.stem))
    return "is not {}".format(SOURCE_KINDS)
