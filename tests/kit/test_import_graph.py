"""nnkit's modules import one another without cycles, lazy imports inside functions
included: libraries never import a command line (issue 12's "engines apart from command
lines"), so any of them can be imported, and tested, alone."""

from __future__ import annotations

import ast

from tests.conftest import KIT_ROOT
from tests.graphs import find_cycle

PACKAGE = KIT_ROOT / "nnkit"


def _imports(source: str, modules: set[str]) -> set[str]:
    """The nnkit modules a file imports anywhere in it (top level or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "nnkit":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("nnkit."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("nnkit.")}
    return found & modules


def _graph() -> dict[str, set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return {name: _imports((PACKAGE / f"{name}.py").read_text(), modules) - {name}
            for name in modules}



def test_nnkit_has_no_import_cycle():
    graph = _graph()
    assert "mpi_train" in graph and "train_cli" in graph["__main__"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_mpi_library_imports_no_command_line():
    graph = _graph()
    for library in ("mpi_train", "model_parallel", "device_parallel", "device_reduce"):
        assert not graph[library] & {"train_cli", "mpi_cli", "bench_mpi", "__main__"}, library
