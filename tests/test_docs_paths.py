"""README and docs name files that exist: a moved module leaves no stale path behind."""

import re

import pytest

from conftest import ROOT

DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
PATH = re.compile(r"(?<![\w./-])((?:pipeline|scripts|tests|targets|configs)/[\w./-]*\w)(?![\w<{*])")
EXAMPLES = {"configs/x.yaml"}  # a config the reader writes


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_repository_path_a_doc_names_exists(doc):
    text = doc.read_text(encoding="utf-8")
    missing = sorted({p for p in PATH.findall(text) if not (ROOT / p).exists() and p not in EXAMPLES})
    assert not missing, "{} names paths that do not exist: {}".format(doc.name, ", ".join(missing))


def test_architecture_names_every_wing():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    wings = sorted(p.name for p in (ROOT / "pipeline").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert [w for w in wings if "  {}/".format(w) not in text] == []
