"""README and docs name files that exist: a moved module leaves no stale path behind; nothing outside
tests/ points at the developers' ../shared/reference folder, which a clone does not have."""

import re
import subprocess

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


# "shared/reference" or Path's "shared" / "reference"
SHARED_REFERENCE = re.compile(rb"shared(?:/|[\"']\s*/\s*[\"'])reference")


def test_nothing_outside_tests_points_at_shared_reference():
    """A fact deploy uses names its public source (a URL, a repository file at a commit) or a file in this
    repository; ../shared/reference exists only beside the developers' checkout. Tests may still read it
    where it exists and skip where it does not."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=str(ROOT), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, check=True).stdout.decode("utf-8").split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    hits = []
    for name in listed:
        path = ROOT / name
        if not name or name.startswith("tests/") or not path.is_file():
            continue
        for number, line in enumerate(path.read_bytes().splitlines(), 1):
            if SHARED_REFERENCE.search(line):
                hits.append("{}:{}".format(name, number))
    assert hits == [], "name the public source instead of ../shared/reference: " + ", ".join(hits)


def test_architecture_names_every_wing():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    wings = sorted(p.name for p in (ROOT / "pipeline").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert [w for w in wings if "  {}/".format(w) not in text] == []


def _wing_imports():
    """{wing: wings it imports} from the source (scripts/import_graph.py's reading): a wing is a top-level
    package or module of pipeline/, with device/agent on its own; errors and pipeline/__init__ left out."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", str(ROOT / "scripts" / "import_graph.py"))
    graph = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graph)
    mods = graph.modules(ROOT / "pipeline")
    edges, _ = graph.imports(mods)

    def wing(module):
        parts = module.split(".")[1:]
        if not parts or parts[0] in ("errors", "__main__"):
            return None
        return "device/agent" if parts[:2] == ["device", "agent"] else parts[0]

    found = {}
    for module, imported in edges.items():
        if wing(module) is None:
            continue
        found.setdefault(wing(module), set()).update(w for w in map(wing, imported) if w not in (None, wing(module)))
    return found


def test_architecture_says_what_imports_what():
    """docs/architecture.md's "What imports what" block is the source's import graph, wing by wing."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text[text.index("### What imports what"):]
    block = block[block.index("```\n") + 4:]
    block = block[:block.index("```")]
    documented = {}
    for line in block.splitlines():
        name, _, deps = line.partition("->")
        documented[name.strip()] = set(deps.split())
    actual = _wing_imports()
    expected = "\n".join("{:<13} -> {}".format(w, " ".join(sorted(actual[w]))).rstrip() for w in sorted(actual))
    assert documented == actual, "docs/architecture.md's import block should read:\n" + expected


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
