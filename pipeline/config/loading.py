"""Loading a config: YAML (``source``), ``--set`` overrides, validation, and one line per problem."""

import difflib
from pathlib import Path

from pydantic import BaseModel, ValidationError

from pipeline.config.schema import Config
from pipeline.config.target_fit import target_problems
from pipeline.errors import DeployError


def parse_override(text):
    """``a.b.c=value`` -> (("a", "b", "c"), value parsed as YAML)."""
    import yaml

    if "=" not in text:
        raise DeployError("--set {!r}: expected KEY.PATH=VALUE, e.g. --set stages.train.epochs=1".format(text))
    key, _, raw = text.partition("=")
    keypath = tuple(p for p in key.strip().split(".") if p)
    if not keypath:
        raise DeployError("--set {!r}: empty key path".format(text))
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return keypath, value


def _apply_override(data, keypath, value, text):
    node = data
    for i, part in enumerate(keypath[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise DeployError("--set {}: {} is not a mapping".format(text, ".".join(keypath[: i + 1])))
        node = child
    node[keypath[-1]] = value


def load_config(path, overrides=()):
    """Load, merge (extends, --set) and validate a config. Raises DeployError listing every problem."""
    data, source = _merged(path, overrides)
    try:
        config = Config.model_validate(data)
    except ValidationError as e:
        problems = in_file_order([_describe(err, source) for err in e.errors()])
        raise ConfigError(_joined(problems), problems)
    config._path = Path(path)
    config._overrides = tuple(overrides)
    config._source = source
    return config


def _merged(path, overrides):
    from pipeline.config.source import load_tree

    data, source = load_tree(path)
    for text in overrides:
        keypath, value = parse_override(text)
        _apply_override(data, keypath, value, text)
        source.overrides.append(keypath)
    return data, source


def _joined(problems):
    return problems[0] + ("\n" + "\n".join(problems[1:]) if len(problems) > 1 else "")


def validate_config(path, overrides=()):
    """``deploy validate``: (config or None, target or None, every problem): the schema's, then the
    target's (its name, and the precision, route and opset the config asks of it; checked on the raw
    values too when the schema fails elsewhere), then the paths the config names (when valid)."""
    data, source = _merged(path, overrides)
    try:
        config, problems = Config.model_validate(data), []
    except ValidationError as e:
        config, problems = None, [_describe(err, source) for err in e.errors()]
    if config is not None:
        config._path, config._source = Path(path), source
    stages = data.get("stages") if isinstance(data.get("stages"), dict) else {}

    def raw(stage, key):
        section = stages.get(stage)
        return section.get(key) if isinstance(section, dict) else None

    blocked = [p for p in problems if " target:" in p or "(top level)" in p]
    target, found = (None, []) if blocked else target_problems(
        data.get("target"), raw("engine", "precision"), raw("convert", "format"), raw("convert", "opset"),
        lambda *keypath: source.locate(tuple(keypath)), raw("engine", "dla_core"))
    problems += [p for p in found if not any(" {}:".format(p.split(" ", 2)[1].rstrip(":")) in q for q in problems)]
    if config is not None and not problems:
        problems += config.path_problems()
    return config, target, in_file_order(problems)


def in_file_order(problems):
    """``problems`` ordered as a reader meets them: by line within each file ("FILE:LINE key: ..."), the files in
    the order they first appear; a problem without a line keeps its place after them (a stable sort)."""
    import re

    files, keys = {}, []
    for text in problems:
        found = re.match(r"(.+?):(\d+) ", text)
        if found:
            keys.append((0, files.setdefault(found.group(1), len(files)), int(found.group(2))))
        else:
            keys.append((1, 0, 0))
    return [p for _, p in sorted(zip(keys, problems), key=lambda pair: pair[0])]


class ConfigError(DeployError):
    """Every problem found in a config, one line each (``problems``)."""

    def __init__(self, message, problems):
        super().__init__(message)
        self.problems = problems


# ---------------------------------------------------------------------------------- messages


def _model_at(keypath):
    """The pydantic model class that holds the mapping at ``keypath`` (for key suggestions)."""
    model = Config
    for part in keypath:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        model = model_class(field.annotation)
        if model is None:
            return None
    return model


def model_class(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = model_class(arg)
        if found is not None:
            return found
    return None


def _describe(err, source):
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (p.startswith("function-") or p in ("list", "dict"))))
    kind = err["type"]
    value = err.get("input")
    where = source.locate(loc)
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = sorted(parent.model_fields) if parent else []
        if parent is Config:
            allowed = sorted(allowed + ["extends"])
        guess = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        hint = "did you mean '{}'? ".format(guess[0]) if guess else ""
        text = "unknown key; {}allowed: {}".format(hint, ", ".join(allowed))
    elif kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        text = "{!r} is not one of {}".format(value, expected.replace(" or ", ", "))
    elif kind == "missing":
        text = "required key is missing"
    elif kind == "value_error":
        text = str(err["msg"]).replace("Value error, ", "")
    else:
        text = "{} (got {})".format(err["msg"], _shown(value)) if not isinstance(value, dict) else err["msg"]
    if kind == "value_error" and not loc:
        return "{} {}".format(where, text)
    return "{} {}: {}".format(where, dotted, text)


def _shown(value, limit=80):
    """``value`` as the error line shows it: repr, cut to ``limit`` characters (a 400-digit number is no line)."""
    text = repr(value)
    return text if len(text) <= limit else "{}... ({} characters)".format(text[:limit], len(text))
