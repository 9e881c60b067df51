"""The cores are sans-IO: no sockets, no event loop, no clock, no files, no global randomness.

Checked on the source (every import statement, at any depth) so a lazy import inside a
function is caught too.  Randomness must be injected: ``from random import Random`` is
allowed, the module-level functions of ``random`` are not.  The trio shells around the
cores (servers, drivers, disks, ``broker/partition.py``, ...) are not listed.
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORES = [
    "kraft/protocol", "kraft/records", "kraft/quotas", "metadata/controller",
    # the Raft core and its simulator (kraft/raft/driver.py and disk.py are the shell)
    "kraft/raft/__init__.py", "kraft/raft/config.py", "kraft/raft/memlog.py",
    "kraft/raft/messages.py", "kraft/raft/node.py", "kraft/raft/sim.py",
    "metadata/image.py", "metadata/delta.py", "metadata/serde.py",
    # partition replication, producer state and the group coordinator
    "broker/partition_state.py", "broker/partition_state_types.py", "broker/producer_state.py",
    *(f"broker/group/{name}.py" for name in ("__init__", "admin", "config", "coordinator", "membership",
                                             "offsets", "output", "records", "state", "table")),
    # the web console's rates and rendering (cli/web_console/server.py is the shell)
    "cli/web_console/throughput.py", "cli/web_console/page.py",
]
FORBIDDEN = {"socket", "trio", "time", "asyncio", "threading", "select", "selectors", "random",
             "os", "datetime"}


def core_files():
    for entry in CORES:
        path = REPO / entry
        yield from (sorted(path.rglob("*.py")) if path.is_dir() else [path])


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
    bad.write_text("def f():\n    import time\n    from trio import sleep\n    import random\n"
                   "    from random import Random\n    from random import random\n")
    assert forbidden_imports(bad) == ["time", "trio", "random", "random"]
