"""kraft.raft's core and simulator import no socket, event loop, clock or global random."""

import ast
from pathlib import Path

import pytest

RAFT = Path(__file__).resolve().parents[1] / "kraft" / "raft"
# The sans-IO core and its simulator; the trio shell (driver, disk) is allowed its I/O.
CORE = ["__init__.py", "config.py", "memlog.py", "messages.py", "node.py", "sim.py"]
FORBIDDEN = {"socket", "trio", "time", "asyncio", "threading", "select", "selectors",
             "random", "os", "datetime"}


def bad_imports(path: Path) -> list[str]:
    found = []
    for item in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(item, ast.Import):
            found += [a.name for a in item.names if a.name.split(".")[0] in FORBIDDEN]
        elif isinstance(item, ast.ImportFrom) and item.module:
            root = item.module.split(".")[0]
            if root == "random" and all(a.name == "Random" for a in item.names):
                continue  # an injected generator is the allowed way
            if root in FORBIDDEN:
                found.append(item.module)
    return found


@pytest.mark.parametrize("path", [RAFT / name for name in CORE], ids=lambda p: p.name)
def test_raft_module_is_sans_io(path):
    assert bad_imports(path) == []


def test_the_check_sees_lazy_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n    import time\n    from random import random\n"
                 "    from random import Random\n")
    assert bad_imports(f) == ["time", "random"]
