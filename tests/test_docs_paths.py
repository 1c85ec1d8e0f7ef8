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


def test_device_doc_says_what_the_targets_say_about_uff():
    """D15 of the device review: docs/device.md said Xavier on JetPack 5 had no UFF while its target files
    offer the route (TensorRT 8.5 still has UffParser). The UFF section names the JetPack line of every
    target with the route, and the TensorRT of every Jetson target without it as the one without UFF."""
    import yaml

    text = (ROOT / "docs" / "device.md").read_text(encoding="utf-8")
    section = text[text.index("## The UFF route"):]
    section = " ".join(section[:section.index("\n## ", 3)].split())
    with_uff, without = set(), set()
    for path in sorted((ROOT / "targets").glob("*.yaml")):
        target = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not target.get("jetpack"):
            continue  # host_cpu: no JetPack, no TensorRT
        jetpack = ".".join(str(target["jetpack"]).split(".")[:2 if str(target["jetpack"]).startswith("4") else 1])
        (with_uff if "uff" in target["routes"] else without).add(
            ("JetPack " + jetpack, "TensorRT " + str(target["tensorrt"]).split(".")[0]))
    refused = section.split("without UFF", 1)[1][:80] if "without UFF" in section else ""
    for jetpack, _ in sorted(with_uff):
        assert jetpack in section, "the UFF section does not name {} although its targets offer UFF".format(jetpack)
        assert jetpack not in refused, "the UFF section calls {} a target without UFF".format(jetpack)
    for _, tensorrt in sorted(without):
        assert "without UFF" in section and tensorrt in section.split("without UFF", 1)[1][:80], tensorrt
    assert "no UFF" not in section
