"""The shape of a Python package, read from its source: import circles, long modules, loose top-level
modules and private names imported across modules. tests/test_architecture.py holds the limits.

    python scripts/import_graph.py pipeline [--max-lines 400] [--max-top 8]

Prints one line of figures and one line per problem; exits 1 when a limit is broken.

An import anywhere in a module counts (a function-level ``import`` is a dependency too), and so does a
package ``__init__`` importing its own children: when a child, or something it imports, imports the
package back, that is a circle, whatever the order of the imports makes work today. A child does not
depend on its package by being imported (``import a.b`` runs ``a/__init__``, but only the edges the
source writes are counted).
"""

import argparse
import ast
import sys
from pathlib import Path


def modules(package_dir):
    """{dotted name: path} of every .py file under ``package_dir`` (a package ``__init__`` is the package)."""
    root = Path(package_dir).resolve()
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _target(name, path, node):
    """The dotted module an ``ImportFrom`` names (relative imports resolved against ``name``)."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(mods):
    """({module: set of modules it imports}, [(importer, "module.name") of private names imported])."""
    edges = {name: set() for name in mods}
    private = []
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                edges[name].update(a.name for a in node.names if a.name in mods and a.name != name)
            elif isinstance(node, ast.ImportFrom):
                target = _target(name, path, node)
                for alias in node.names:
                    child = "{}.{}".format(target, alias.name)
                    module = child if child in mods else target  # "from pkg import child" names a module
                    if module not in mods or module == name:
                        continue
                    edges[name].add(module)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append((name, "{}.{}".format(module, alias.name)))
    return edges, private


def circles(edges):
    """The strongly connected groups of more than one module (Tarjan's algorithm, without recursion)."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def long_modules(mods, max_lines):
    """[(module, lines)] of the modules longer than ``max_lines``."""
    counts = {name: path.read_text(encoding="utf-8").count("\n") for name, path in mods.items()}
    return sorted((name, n) for name, n in counts.items() if n > max_lines)


def loose_modules(mods):
    """Modules directly in the top package that are not packages (``__main__`` aside)."""
    return sorted(name for name, path in mods.items()
                  if name.count(".") == 1 and path.name != "__init__.py" and not name.endswith(".__main__"))


def measure(package_dir, max_lines=400):
    """Every figure of the package at ``package_dir``, as a dict."""
    mods = modules(package_dir)
    edges, private = imports(mods)
    return {"modules": len(mods), "circles": circles(edges), "long": long_modules(mods, max_lines),
            "private": sorted(private), "loose": loose_modules(mods)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", help="the package's folder (e.g. pipeline)")
    parser.add_argument("--max-lines", type=int, default=400)
    parser.add_argument("--max-top", type=int, default=8)
    args = parser.parse_args(argv)
    m = measure(args.package, args.max_lines)
    print("{} modules: {} circles, {} over {} lines, {} private imports, {} loose top-level modules (max {})".format(
        m["modules"], len(m["circles"]), len(m["long"]), args.max_lines, len(m["private"]), len(m["loose"]),
        args.max_top))
    for group in m["circles"]:
        print("circle (modules that import each other, directly or not): " + ", ".join(group))
    for name, n in m["long"]:
        print("long: {} ({} lines)".format(name, n))
    for importer, name in m["private"]:
        print("private: {} imports {}".format(importer, name))
    if len(m["loose"]) > args.max_top:
        print("loose: " + ", ".join(m["loose"]))
    broken = m["circles"] or m["long"] or m["private"] or len(m["loose"]) > args.max_top
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
