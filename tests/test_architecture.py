"""The house rules of docs/architecture.md, measured on the source by scripts/import_graph.py: no import
circles (a package __init__ importing its children counts), at most 8 loose top-level modules, at most
400 lines a module, no private name imported across modules."""

import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "import_graph.py"
MAX_LINES = 400
MAX_TOP = 8


def _load():
    spec = importlib.util.spec_from_file_location("import_graph", str(SCRIPT))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


graph = _load()


@pytest.fixture(scope="module")
def figures():
    return graph.measure(ROOT / "pipeline", MAX_LINES)


def test_no_import_circles(figures):
    assert figures["circles"] == [], "modules that import each other: {}".format(figures["circles"])


def test_at_most_8_loose_top_level_modules(figures):
    assert len(figures["loose"]) <= MAX_TOP, "a new module belongs in a wing: {}".format(figures["loose"])


def test_no_module_over_400_lines(figures):
    assert figures["long"] == [], "split along a seam of meaning: {}".format(figures["long"])


def test_no_private_imports_across_modules(figures):
    assert figures["private"] == [], "make it public or keep it in its module: {}".format(figures["private"])


def test_the_checker_sees_what_it_checks(tmp_path):
    """A package __init__ that imports a child which imports the package back is a circle; a private name
    imported from a sibling is reported; a long module and loose modules are counted."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub import child\n\ndef helper():\n    pass\n")
    (pkg / "sub" / "child.py").write_text("def f():\n    from pkg.sub import helper\n")
    (pkg / "a.py").write_text("from pkg.b import _hidden\n")
    (pkg / "b.py").write_text("_hidden = 1\n" + "x = 1\n" * 10)
    m = graph.measure(pkg, max_lines=5)
    assert m["circles"] == [["pkg.sub", "pkg.sub.child"]]
    assert m["private"] == [("pkg.a", "pkg.b._hidden")]
    assert m["long"] == [("pkg.b", 11)]
    assert m["loose"] == ["pkg.a", "pkg.b"]


def test_the_command_line_exits_1_on_a_broken_rule(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n" * 3)
    run = lambda *extra: subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "pkg"), *extra],  # noqa: E731
                                        capture_output=True, text=True)
    ok = run()
    assert ok.returncode == 0 and "0 circles" in ok.stdout
    long = run("--max-lines", "2")
    assert long.returncode == 1 and "long: pkg.a (3 lines)" in long.stdout


def test_check_never_imports_rewrite():
    """rewrite/ builds on check/ (it checks each round): check/ itself never imports rewrite/, not even
    inside a function. The `deploy rewrite --auto` prediction of a NO is asked by the check verb and the
    check stage (check_model(..., predict=pipeline.rewrite.predict.predict_rewrite))."""
    import ast

    found = []
    for path in sorted((ROOT / "pipeline" / "check").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += ["{}:{} {}".format(path.relative_to(ROOT), node.lineno, n) for n in names
                      if n == "pipeline.rewrite" or n.startswith("pipeline.rewrite.")]
    assert found == []
