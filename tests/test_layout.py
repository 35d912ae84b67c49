"""The grader's layout: every module imports, no import cycle among them, no module over
400 lines without saying why, and no test reaching for a private name of the grader."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.conftest import KIT_ROOT
from tests.graphs import find_cycle

GRADER = KIT_ROOT / "grader"
LIMIT = 400  # lines; a longer module states why in its docstring ("over 400 lines")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(GRADER.rglob("*.py")):
        rel = path.relative_to(KIT_ROOT).with_suffix("")
        if "student_files" in rel.parts:
            continue  # copied into the student kit, not a module of the grader
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The grader modules `name` imports at module level (not inside functions, where an
    import is deliberately late), as dotted names of modules in `known`."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` imports never run
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for target in targets:
            # a module, or the package whose name a `from` imports (its __init__ runs)
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}



def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_grader():
    graph = _graph()
    assert "grader.parts.gemm" in graph and graph["grader.parts.gemm"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_nothing_imports_the_command_line_entry():
    graph = _graph()
    assert not [name for name, deps in graph.items() if "grader.__main__" in deps]


@pytest.mark.parametrize("name", sorted(n for n in _modules() if not n.endswith("__main__")))
def test_every_module_imports(name):
    importlib.import_module(name)


def test_no_module_over_the_limit_without_a_reason():
    long = [f"{p.relative_to(KIT_ROOT)}: {n} lines" for p in _modules().values()
            if (n := len(p.read_text().splitlines())) > LIMIT
            and "over 400 lines" not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert not long


WORKER_PRIVATE: set[str] = set()  # private names a test may still reach: none


def _private_uses(path: Path) -> list[str]:
    """`from grader... import _x`, and `m._x` where m names a grader module or object."""
    tree = ast.parse(path.read_text())
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader"):
            found += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
            bound |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            bound |= {a.asname for a in node.names if a.name.startswith("grader") and a.asname}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in bound and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            found.append(f"{path.name}: {node.value.id}.{node.attr}")
    return found


def test_the_private_name_finder_finds_them(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("from grader.parts import gemm\nfrom grader.cli import _x\ngemm._y\n")
    assert _private_uses(probe) == ["test_probe.py: grader.cli._x", "test_probe.py: gemm._y"]


def test_no_test_uses_a_private_name_of_the_grader():
    found = []
    for path in sorted(Path(__file__).parent.rglob("test_*.py")):
        found += [f for f in _private_uses(path) if f not in WORKER_PRIVATE]
    assert not found
