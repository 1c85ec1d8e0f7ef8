"""Small file helpers: content hashes of files and directories, atomic JSON writes."""

import hashlib
import json
import os
import tempfile
from pathlib import Path

_CHUNK = 1 << 20


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
        os.replace(tmp, str(path))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path, data):
    """Write JSON atomically."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
