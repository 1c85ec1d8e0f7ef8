"""Reading config files: YAML with bounds and line numbers, and ``extends`` chains.

    data, source = load_tree(Path("configs/jetson_tx2.yaml"))   # merged dict; source.locate(keypath)

Aliases that expand past MAX_VALUES values, nesting past MAX_DEPTH levels, recursive aliases and a
key written twice are one-line DeployErrors naming the file and line (a "billion laughs" config is
refused in well under a second: scripts/bench/config_bomb.py).
"""

from pathlib import Path

from pipeline.errors import DeployError


class Source:
    """Line numbers of each key path in each file that contributed to the merged config."""

    def __init__(self):
        self.files = []  # [(path, {keypath: line})], the most specific (last merged) first
        self.overrides = []  # key paths set with --set

    def locate(self, keypath):
        if keypath and any(keypath[: len(p)] == p or p[: len(keypath)] == keypath for p in self.overrides):
            return "--set"
        for path, lines in self.files:
            for n in range(len(keypath), 0, -1):
                if keypath[:n] in lines:
                    return "{}:{}".format(path, lines[keypath[:n]])
        return str(self.files[0][0]) if self.files else "<config>"


MAX_DEPTH = 64  # nesting levels a config may have
MAX_VALUES = 100_000  # keys and values, counting each alias expansion ("billion laughs" stops here)


def _line_map(node, path):
    """{key path tuple: 1-based line} for a composed YAML node, walked without recursion and with
    bounds: a key written twice in one mapping, nesting deeper than MAX_DEPTH, aliases that expand
    beyond MAX_VALUES values or refer to themselves are DeployErrors naming the line."""
    import yaml

    out, count = {}, 0
    stack = [(node, (), frozenset())]
    while stack:
        node, prefix, open_ = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise DeployError("{}: the config expands to more than {:,} values (YAML aliases that multiply); write it "
                              "out without the nested aliases".format(path, MAX_VALUES))
        if len(prefix) > MAX_DEPTH:
            raise DeployError("{}:{} the config is nested more than {} levels deep; a config has a few".format(
                path, node.start_mark.line + 1, MAX_DEPTH))
        if id(node) in open_:
            raise DeployError("{}:{} a YAML alias refers to itself (a recursive structure); remove it".format(
                path, node.start_mark.line + 1))
        inner = open_ | {id(node)} if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) else open_
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, value_node in node.value:
                key = key_node.value
                if not isinstance(key, str):
                    key = str(key)
                if key in seen:
                    raise DeployError("{}:{} {}: key written twice (first at line {}); keep one".format(
                        path, key_node.start_mark.line + 1, ".".join(str(k) for k in prefix + (key,)), seen[key]))
                seen[key] = key_node.start_mark.line + 1
                out.setdefault(prefix + (key,), key_node.start_mark.line + 1)
                stack.append((value_node, prefix + (key,), inner))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                out.setdefault(prefix + (i,), item.start_mark.line + 1)
                stack.append((item, prefix + (i,), inner))
    return out


def _read_yaml(path):
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        if Path(path).is_dir():
            raise DeployError("{}: is a directory; give a config file (.yaml)".format(path))
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DeployError("{}: config file not found".format(path))
    except (OSError, UnicodeDecodeError) as e:
        raise DeployError("{}: cannot read config: {}".format(path, " ".join(str(e).split())))
    try:
        node = yaml.compose(text, Loader=loader)
        lines = _line_map(node, path) if node is not None else {}
        data = yaml.load(text, Loader=loader)  # within the bounds _line_map checked
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = "{}:{}".format(path, mark.line + 1) if mark else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if "nesting depth" in problem:  # PyYAML >= 6.0.4 stops deep nesting itself, before _line_map
            raise DeployError("{} the config is nested more than {} levels deep; a config has a few".format(
                where, MAX_DEPTH)) from None
        raise DeployError("{} invalid YAML: {}".format(where, problem))
    except RecursionError:
        raise DeployError("{}: the config is nested too deeply to read; a config has a few levels".format(path))
    if data is None:
        raise DeployError("{}: config file is empty".format(path))
    if not isinstance(data, dict):
        raise DeployError("{}: a config is a mapping of keys (run, model, dataset, target, stages), got {}".format(path, type(data).__name__))
    return data, lines


def _merge(base, over):
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _load_tree(path, source, seen):
    path = Path(path)
    if path.resolve() in seen:
        raise DeployError("{}: 'extends' loops back to {}".format(seen[-1] if seen else path, path))
    data, lines = _read_yaml(path)
    source.files.insert(0, (path, lines))
    base_name = data.pop("extends", None)
    if base_name is None:
        return data
    if not isinstance(base_name, str):
        raise DeployError("{}:{} extends: expected a file name, got {!r}".format(path, lines.get(("extends",), "?"), base_name))
    base_path = path.parent / base_name
    if not base_path.exists():
        raise DeployError("{}:{} extends: base config {} not found".format(path, lines.get(("extends",), "?"), base_path))
    base = _load_tree(base_path, source, seen + [path.resolve()])
    # the base was inserted at position 0; this file is more specific, so it goes first again
    source.files.remove((path, lines))
    source.files.insert(0, (path, lines))
    return _merge(base, data)


def load_tree(path):
    """(merged data of ``path`` and the configs it extends, Source of line numbers)."""
    source = Source()
    return _load_tree(Path(path), source, []), source
