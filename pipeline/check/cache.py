"""deploy check's answers kept on disk: a re-check of an unchanged model answers in well under a second.

    answers = AnswerCache.for_check(args.target, routes, signature, convert, predict=True)   # None: off
    report = answers.get("model.pb")        # a CheckReport (report.cached set), or None: a miss
    answers.put("model.pb", report)         # atomically; a report that may change on its own is not kept

Where: ``$DEPLOY_CHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/deploy/check``, else ``~/.cache/deploy/check``;
``DEPLOY_CHECK_CACHE=0`` (or ``--no-cache``) switches it off. One JSON file an answer, named by its key.

The key is a SHA-256 over everything the answer depends on: the model's bytes (a SavedModel: every
file in it, by relative path), the target as given and the bytes of every file of the targets
folder (its *.yaml and ops/: targets, op tables, converter tables) and of a target .yaml given by path, the routes, the
signature, whether tf2onnx runs and whether the model is trusted (--trust-model), the versions of
deploy, TensorFlow, tf2onnx, onnx and Keras, and a digest of the source of deploy's packages that make the
answer (an edited checker is a new checker). A different byte, target, opset table, tf2onnx or deploy is a miss.
An entry is validated when read (its schema, its key, every field of the report rebuilt as the
report's own dataclasses): anything else is a miss, never a crash. Answers that depend on the
moment (a conversion that timed out or whose worker died) are never stored.

The folder stays bounded: a hit touches its entry, and at most once a day a store removes the entries (answers
and the latency estimates kept beside them in ``estimate/``) that nothing read or wrote for
``$DEPLOY_CHECK_CACHE_DAYS`` days (default 30; ``0`` keeps everything), and temporary files a killed
check left behind.
"""

import hashlib
import json
import os
import sys
from pathlib import Path

SCHEMA = "deploy.check-cache/1"
DIR_ENV = "DEPLOY_CHECK_CACHE_DIR"
OFF_ENV = "DEPLOY_CHECK_CACHE"
DAYS_ENV = "DEPLOY_CHECK_CACHE_DAYS"
KEEP_DAYS = 30.0
_PRUNED = ".pruned"  # its mtime: when the folder was last pruned
_PACKAGES = ("tensorflow", "tensorflow-cpu", "tf2onnx", "onnx", "keras", "protobuf")


def cache_dir():
    """Where answers live (see the module doc)."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "deploy" / "check"


def enabled():
    return os.environ.get(OFF_ENV, "").strip().lower() not in ("0", "off", "no", "false")


class AnswerCache:
    def __init__(self, folder, context):
        self.folder, self.context = Path(folder), context

    @classmethod
    def for_check(cls, target, routes=None, signature="serving_default", convert=None, predict=False, timeout=None):
        """The cache for checks against ``target`` (a name or a .yaml path, as given) with these options, or
        None when switched off."""
        if not enabled():
            return None
        from pipeline.check import convert_probe
        from pipeline.tf.screen import trusted

        converting = convert is not False and convert_probe.available()
        context = {"target": str(target), "target_files": _target_files(target), "routes": sorted(routes or []),
                   "signature": signature or "serving_default", "convert": bool(converting), "trusted": trusted(),
                   "predict": bool(predict), "versions": _versions(), "code": _code_digest(),
                   "timeout": timeout if timeout is not None else convert_probe.timeout_seconds()}
        return cls(cache_dir(), context)

    def key(self, path):
        digest = hashlib.sha256(json.dumps(self.context, sort_keys=True).encode())
        digest.update(model_digest(path).encode())
        return digest.hexdigest()

    def get(self, path):
        """The stored report for ``path`` (``report.cached``: when it was stored), or None."""
        try:
            key = self.key(path)
            with open(str(self.folder / (key + ".json")), "rb") as handle:
                entry = json.loads(handle.read().decode("utf-8"))
            if entry.get("schema") != SCHEMA or entry.get("key") != key:
                return None
            report = rebuild(entry["report"])
            report.fingerprint = entry.get("fingerprint")
            report.cached = {"stored": entry["stored"], "file": str(self.folder / (key + ".json"))}
        except Exception:  # noqa: BLE001 - a missing, truncated, foreign or old entry is a miss
            return None
        from pipeline.files import touch

        touch(self.folder / (key + ".json"))  # used now: prune keeps it
        report.model["path"] = str(path)
        return report

    def put(self, path, report):
        """Store ``report`` for ``path`` (atomically: a temporary file renamed); quietly nothing when it
        cannot be written (a read-only home) or the answer may change on its own."""
        import dataclasses
        import tempfile
        import time

        if not storable(report):
            return False
        try:
            key = self.key(path)
            self.folder.mkdir(parents=True, exist_ok=True)
            entry = {"schema": SCHEMA, "key": key, "stored": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "fingerprint": getattr(report, "fingerprint", None), "report": dataclasses.asdict(report)}
            fd, part = tempfile.mkstemp(dir=str(self.folder), prefix=".part-", suffix=".json")
            try:
                with os.fdopen(fd, "w") as handle:
                    json.dump(entry, handle)
                os.replace(part, str(self.folder / (key + ".json")))
            except BaseException:
                os.unlink(part)
                raise
        except (OSError, TypeError, ValueError):
            return False
        prune(self.folder)
        return True


def keep_days():
    """How many days an unused entry is kept (``$DEPLOY_CHECK_CACHE_DAYS``; 0: for ever)."""
    text = os.environ.get(DAYS_ENV, "").strip()
    if not text:
        return KEEP_DAYS
    try:
        days = float(text)
        if days < 0 or days != days:
            raise ValueError
    except ValueError:
        sys.stderr.write("deploy: {}={!r} is not a number of days (0 or more); keeping unused check-cache entries "
                         "{:g} days\n".format(DAYS_ENV, text, KEEP_DAYS))
        return KEEP_DAYS
    return days


def prune(folder, now=None, every=86400.0):
    """Remove the entries of ``folder`` (and its ``estimate/``) unused for keep_days(), and ``.part-`` files older
    than an hour (a check killed while storing); at most once per ``every`` seconds (the ``.pruned`` marker).
    Returns the number of files removed. Never raises: a cache that cannot be pruned is still a cache."""
    import time

    now = time.time() if now is None else now
    folder = Path(folder)
    days = keep_days()
    marker = folder / _PRUNED
    try:
        if days == 0 or now - marker.stat().st_mtime < every:
            return 0
    except OSError:
        pass  # never pruned: prune now
    removed = 0
    for sub in (folder, folder / "estimate"):
        try:
            names = os.listdir(str(sub))
        except OSError:
            continue
        for name in names:
            limit = 3600.0 if name.startswith(".part-") else days * 86400.0
            if not name.endswith(".json"):
                continue
            path = sub / name
            try:
                if now - path.stat().st_mtime > limit:
                    path.unlink()
                    removed += 1
            except OSError:
                pass  # gone already (another check pruning) or not ours to remove
    try:
        marker.touch()
        os.utime(str(marker), (now, now))
    except OSError:
        pass
    return removed


def storable(report):
    """Whether an answer depends only on its key: not when tf2onnx timed out or its worker died
    (check_model sets ``report.transient``): the next check may convert."""
    return not getattr(report, "transient", False)


def rebuild(data):
    """A CheckReport from ``dataclasses.asdict`` of one; TypeError/KeyError/ValueError when it is not one."""
    from pipeline.check.findings import CheckReport, Finding, RouteResult

    def finding(f):
        if not isinstance(f, dict):
            raise ValueError("not a finding")
        return Finding(**f)

    routes = []
    for r in data["routes"]:
        r = dict(r)
        r["findings"] = [finding(f) for f in r["findings"]]
        r["accepted_but_wrong"] = [finding(f) for f in r["accepted_but_wrong"]]
        routes.append(RouteResult(**r))
    rest = {k: v for k, v in data.items() if k not in ("routes", "findings")}
    report = CheckReport(routes=routes, findings=[finding(f) for f in data["findings"]], **rest)
    if not isinstance(report.model, dict) or not isinstance(report.target, dict):
        raise ValueError("not a report")
    return report


def model_digest(path):
    """SHA-256 of a model file's bytes, or of a folder's files (relative path and bytes, in order)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for root, dirs, files in os.walk(str(path)):
            dirs.sort()
            for name in sorted(files):
                full = Path(root) / name
                digest.update(str(full.relative_to(path)).encode() + b"\0")
                _update(digest, full)
    else:
        _update(digest, path)
    return digest.hexdigest()


def _update(digest, path):
    from pipeline.files import KERAS_BYTES, open_regular

    # the rule every reader follows: a named pipe or /dev/zero is refused by name, never read (a zoo member too)
    with open_regular(path, "a model", KERAS_BYTES) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)


def _target_files(target):
    """SHA-256 of the target files and op tables (the targets folder's *.yaml and ops/), and of the target file
    when given by path."""
    from pipeline.targets.files import op_tables_dir, targets_dir

    digest = hashlib.sha256()
    folder = targets_dir()
    found = sorted(folder.glob("*.y*ml")) + sorted(f for f in op_tables_dir().rglob("*") if f.is_file())
    for full in found:
        digest.update(str(full.relative_to(folder)).encode() + b"\0")
        _update(digest, full)
    given = Path(str(target))
    if given.suffix.lower() in (".yaml", ".yml") and given.is_file():
        digest.update(b"given\0" + str(given.resolve()).encode())
        for sibling in sorted(given.resolve().parent.glob("*.y*ml")):  # what an extends: may name
            _update(digest, sibling)
    return digest.hexdigest()


def _versions():
    """{package: version or None} of deploy and _PACKAGES, from the installed packages' folder names
    (pipeline.files.installed_versions: no importlib.metadata on a cache hit)."""
    from pipeline import __version__
    from pipeline.files import distribution_name, installed_versions

    installed = installed_versions()
    return dict({"deploy": __version__}, **{name: installed.get(distribution_name(name)) for name in _PACKAGES})


_CODE = ("__init__.py", "check", "convert", "graph", "rewrite", "targets", "tf")  # what makes an answer


def _code_digest():
    """SHA-256 of the Python source of deploy's packages that make an answer (_CODE, under pipeline/)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for full in sorted(f for part in _CODE for f in ([root / part] if part.endswith(".py") else (root / part).rglob("*.py"))):
        digest.update(str(full.relative_to(root)).encode() + b"\0")
        _update(digest, full)
    return digest.hexdigest()
