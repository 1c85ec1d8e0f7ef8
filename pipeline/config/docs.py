"""The config reference (docs/config.md), generated from the schema so it cannot drift.

    python -m pipeline.config.docs > docs/config.md
"""

from pipeline.config.loading import model_class
from pipeline.config.schema import Config

INTRO = """\
# Config reference

Generated from the schema by `python -m pipeline.config.docs > docs/config.md`; a test fails
when this file and the code disagree. `deploy schema` prints the same as JSON Schema.

A config is YAML, read with PyYAML's safe loader. `extends: base.yaml` (relative to the file)
merges a base under it: mappings merge key by key, anything else is replaced (a base's `model.zoo`
stays unless you set `zoo: null` beside your `model.source`). The paths a config names for the run
(`model.source`, `dataset.path`, `stages.train.init_from`, `run.dir`) are read from the current directory,
as `deploy run` is started; `extends` from the config's own folder. `--set KEY=VALUE`
overrides one key from the command line; the value is read as YAML (`--set stages.benchmark.batch_sizes=[1,4]`).
Unknown keys are errors, with the closest known key suggested.

`stages` lists the stages to run; they run in pipeline order (train, export, freeze, check,
rewrite, convert, engine, benchmark) whatever the order in the file. A stage listed with no options (`export:`)
runs with the defaults below.
"""


def _type_name(annotation):
    text = getattr(annotation, "__name__", None) or str(annotation)
    text = str(annotation) if "[" in str(annotation) else text
    return (text.replace("typing.", "").replace("Optional[", "").replace("]", "")
            .replace("Literal[", "one of ").replace("List[", "list of ").replace("NoneType", "null"))


def _default(field):
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return "`{}`".format(field.default_factory())
    return "`{}`".format("null" if field.default is None else field.default)


def _section(title, model, lines):
    lines.append("")
    lines.append("## " + title)
    doc = (model.__doc__ or "").strip()
    if doc and not doc.startswith("!!!") and "Usage docs" not in doc:
        lines.append("")
        lines.append(doc)
    lines.append("")
    lines.append("| key | type | default | meaning |")
    lines.append("|---|---|---|---|")
    nested = []
    for name, field in model.model_fields.items():
        sub = model_class(field.annotation)
        if sub is not None:
            nested.append((title + "." + name if title != "top level" else name, sub))
            kind = "mapping (below)"
        else:
            kind = _type_name(field.annotation)
        lines.append("| `{}` | {} | {} | {} |".format(name, kind, _default(field), (field.description or "").replace("|", "\\|")))
    for sub_title, sub in nested:
        _section(sub_title, sub, lines)


def reference_markdown():
    lines = [INTRO.rstrip()]
    _section("top level", Config, lines)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
