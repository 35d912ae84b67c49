"""Which top-level functions and classes of a module one of its functions cannot reach.

A rule may fail an item only where the graded function can run the code that breaks it:
in Part 3's data-parallel module another communicator is a note (its functions get the
real one), except where `scatter_batch`, which gets a counting communicator, can reach it
(grader/parts/mpi.py). Reach is by name: the function reaches every top-level function or
class whose name appears in its body, and whatever those reach; module-level code (an
alias `f = helper`, a default built at import) reaches what it names too, for every
function. Code under `if __name__ == "__main__":` is not run by the grader.
"""

from __future__ import annotations

import ast
from pathlib import Path

from grader.checks.policy.names import _main_guard
from grader.checks.policy.source import _read

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def unreached_lines(folder: Path, module: str, function: str) -> frozenset[int]:
    """Lines of `module`.py's top-level functions and classes (decorators included) that
    `function` cannot reach; empty when the module cannot be read or parsed, or has no
    such function (then nothing is let off)."""
    source, _ = _read(Path(folder) / f"{module}.py")
    if source is None:
        return frozenset()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, _DEFS):
            if node.name in defs:  # bound twice: the policy refuses it; let nothing off
                return frozenset()
            defs[node.name] = node
    if function not in defs:
        return frozenset()
    todo = [function]
    for node in tree.body:
        if not isinstance(node, _DEFS) and not (isinstance(node, ast.If)
                                                and _main_guard(node.test)):
            todo.extend(_names(node, defs))
    reached: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_names(defs[name], defs))
    lines: set[int] = set()
    for name, node in defs.items():
        if name not in reached:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            lines.update(range(first, (node.end_lineno or node.lineno) + 1))
    return frozenset(lines)


def _names(node: ast.AST, defs: dict[str, ast.AST]) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs]
