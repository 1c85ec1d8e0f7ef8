"""Where deploy's facts live and how they are read: one directory resolver, one cached loader.

    targets_dir()                                  # the repo's targets/, or $DEPLOY_TARGETS_DIR
    op_tables_dir()                                # <targets dir>/ops
    value = load_cached(path, parse)               # parse(path) once per (path, mtime, size)
    data = read_yaml(path, "target file")          # DeployError: "targets/x.yaml: line 3: invalid YAML: ..."
    message = validation_message(exc, allowed_at)  # pydantic errors on one line: "key 'a.b': what is wrong"
"""

import os
from pathlib import Path

from pipeline.errors import DeployError

# The repo's targets/ directory; DEPLOY_TARGETS_DIR overrides it at call time.
TARGETS_DIR = Path(__file__).resolve().parent.parent.parent / "targets"
TARGETS_DIR_ENV = "DEPLOY_TARGETS_DIR"
OPS_SUBDIR = "ops"  # op tables and the checker's op data live in <targets dir>/ops/


def targets_dir() -> Path:
    """The directory of target files: $DEPLOY_TARGETS_DIR if set, else the repo's targets/."""
    override = os.environ.get(TARGETS_DIR_ENV)
    if not override:
        return TARGETS_DIR
    path = Path(override).expanduser()
    if not path.is_dir():
        raise DeployError(f"{TARGETS_DIR_ENV}={override}: no such directory; point it at a directory of target .yaml files or unset it")
    return path


def op_tables_dir() -> Path:
    """The directory of op tables and op data: <targets dir>/ops (``DEPLOY_TARGETS_DIR`` moves it)."""
    return targets_dir() / OPS_SUBDIR


def display(path):
    """A path as the user would type it: relative to the working directory when inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


_CACHE = {}


def load_cached(path, parse):
    """``parse(path)`` for the file at ``path``, cached per (parse, path, mtime, size): an edited or
    regenerated file is read again. Errors are not cached. OSError if the file is missing."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (parse, str(path), stat.st_mtime_ns, stat.st_size)
    try:
        return _CACHE[key]
    except KeyError:
        value = _CACHE[key] = parse(path)
        return value


def clear_cache():
    """Forget every cached file (tests that edit data files in place within one mtime tick)."""
    _CACHE.clear()


_DATA_PARSERS = {}  # one parse function per message: load_cached keys on the function itself


def data_file(name, what="deploy's op data"):
    """A YAML data file in the op-tables directory, parsed once per (path, mtime, size); {} when absent."""
    path = op_tables_dir() / name
    if not path.exists():
        return {}
    parse = _DATA_PARSERS.get(what)
    if parse is None:  # a new lambda per call would be a new cache key: every call parsed the file again
        parse = _DATA_PARSERS[what] = lambda p: read_yaml(p, f"{what} (reinstall deploy, or check DEPLOY_TARGETS_DIR)")
    return load_cached(path, parse)


def read_yaml(path, what, shown=None):
    """The YAML document at ``path`` as plain data; a key written twice is an error (PyYAML would
    keep the last silently). ``shown``: how to name the file in messages (default: ``path``)."""
    _import_yaml()  # sets the module's yaml
    shown = shown or str(path)
    try:
        with open(str(path), "rb") as handle:
            return parse_yaml(handle)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise DeployError(f"{shown}:{where}: invalid YAML: {exc.problem}; fix the file") from None
    except yaml.YAMLError as exc:
        raise DeployError(f"{shown}: invalid YAML: {' '.join(str(exc).split())}; fix the file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeployError(f"{shown}: cannot read {what}: {exc}") from None


def validation_message(exc, allowed_at):
    """All of a pydantic ValidationError's errors on one line, each as: key 'a.b': what is wrong.

    ``allowed_at(loc, is_key)`` names the keys allowed where an unknown key was found (``loc`` the
    key path as a list; ``is_key``: the mapping key itself failed a Literal check)."""
    problems = []
    for err in exc.errors():
        is_key = "[key]" in err["loc"]
        loc = [p for p in err["loc"] if p != "[key]"]
        text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        kind, msg = err["type"], err["msg"]
        if kind == "extra_forbidden" or (is_key and kind == "literal_error"):
            msg = f"unknown key; allowed keys: {', '.join(allowed_at(loc, is_key))}"
        elif kind == "missing":
            msg = "required key is missing"
        elif kind == "value_error":
            msg = msg.removeprefix("Value error, ")
        elif kind == "tuple_type":  # tuples hold YAML lists
            msg = f"Input should be a list (got {err['input']!r})"
        else:
            msg = f"{msg} (got {err['input']!r})"
        problems.append(f"key '{text}': {msg}" if text else msg)
    return "; ".join(problems)


_STR_TAG = "tag:yaml.org,2002:str"
yaml = None  # PyYAML, imported by the first parse (a reader of targets_dir() alone, the check cache, needs none)
_Loader = None  # (C)SafeLoader whose documents _build makes: a key written twice in one mapping is an error


def _import_yaml():
    global yaml, _Loader
    if _Loader is None:
        import yaml as module

        base = getattr(module, "CSafeLoader", module.SafeLoader)  # libyaml when PyYAML has it: much faster parsing
        yaml, _Loader = module, type("_Loader", (base,), {})
    return _Loader


def parse_yaml(stream):
    """The YAML document in ``stream`` as plain Python data (safe tags only); duplicate keys rejected.

    libyaml composes the node tree; _build turns it into data, taking strings straight from the
    nodes (most scalars in a table) and leaving other scalars to the safe constructor. About twice
    as fast as yaml.load with CSafeLoader on these files.
    """
    loader = _import_yaml()(stream)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            return _build(loader, node)
        except RecursionError:
            raise yaml.constructor.ConstructorError(None, None, "recursive anchor", node.start_mark) from None
    finally:
        loader.dispose()


def _build(loader, node):
    kind = node.__class__
    if kind is yaml.ScalarNode:
        return node.value if node.tag == _STR_TAG else loader.construct_object(node)
    if kind is yaml.SequenceNode:
        return [_build(loader, child) for child in node.value]
    if kind is not yaml.MappingNode or node.tag != yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG:
        return loader.construct_object(node, deep=True)  # e.g. !!set, !!omap: the safe constructor decides
    loader.flatten_mapping(node)  # YAML merge keys (<<)
    mapping = {}
    for key_node, value_node in node.value:
        key = _build(loader, key_node)
        try:
            duplicate = key in mapping
        except TypeError:
            raise yaml.constructor.ConstructorError(None, None, f"unhashable key {key!r}", key_node.start_mark) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, f"key '{key}' appears twice", key_node.start_mark)
        mapping[key] = _build(loader, value_node)
    return mapping
