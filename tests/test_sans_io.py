"""The cores are sans-IO: no sockets, no event loop, no clock, no global randomness.

Checked on the source (every import statement, at any depth) so a lazy import inside a
function is caught too.  Randomness must be injected: ``from random import Random`` is
allowed, the module-level functions of ``random`` are not.
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE_PACKAGES = ["kraft/protocol", "kraft/records"]
FORBIDDEN = {"socket", "trio", "time", "asyncio", "threading", "select", "selectors", "random"}


def core_files():
    for package in CORE_PACKAGES:
        yield from sorted((REPO / package).rglob("*.py"))


def forbidden_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN:
                    found.append(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root == "random" and all(a.name == "Random" for a in node.names):
                continue
            if root in FORBIDDEN:
                found.append(node.module)
    return found


@pytest.mark.parametrize("path", list(core_files()), ids=lambda p: str(p.relative_to(REPO)))
def test_core_module_is_sans_io(path):
    assert forbidden_imports(path) == []


def test_the_check_catches_a_lazy_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import time\n    from trio import sleep\n    import random\n")
    assert forbidden_imports(bad) == ["time", "trio", "random"]
