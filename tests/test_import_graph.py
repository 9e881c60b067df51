"""No import circles: the project's modules, with every import statement they hold (at
module level, inside functions, under TYPE_CHECKING), form no cycle.

An import inside a function hides a circle from Python, not from a reader: the two modules
still cannot be understood one without the other.  ``from package import submodule`` is an
edge to the submodule (Python runs the package's ``__init__`` either way)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from jepsen.checkers.txn_graph import sccs

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kraft", "broker", "metadata", "cli", "jepsen", "bench")



def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def import_graph(mods: dict[str, Path], module_level_only: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        nodes = tree.body if module_level_only else ast.walk(tree)
        is_package = path.name == "__init__.py"
        for node in nodes:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".") if is_package else name.split(".")[:-1]
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:  # a name inside a module: the module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (the transactional checker's
    Tarjan, over the graph with its edges in order)."""
    return [set(group) for group in sccs({node: sorted(edges) for node, edges in graph.items()})]


def test_no_module_imports_itself_back_at_load_time():
    assert cycles(import_graph(modules(), module_level_only=True)) == []


def test_no_import_circles():
    found = [sorted(c) for c in cycles(import_graph(modules()))]
    assert found == [], f"import circles: {found}"


def test_the_cycle_finder_finds_a_circle_hidden_in_a_function(tmp_path):
    # The test must be able to fail: two modules importing each other, one lazily.
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import x\n")
    mods = {"a": tmp_path / "a.py", "b": tmp_path / "b.py"}
    assert cycles(import_graph(mods)) == [{"a", "b"}]
    assert cycles(import_graph(mods, module_level_only=True)) == []
