"""Which top-level functions of a module one of its functions cannot reach.

A rule may fail an item only where the graded function can run the code that breaks it:
in Part 3's data-parallel module another communicator is a note (its functions get the
real one), except where `scatter_batch`, which gets a counting communicator, can reach it
(grader/parts/mpi.py; the ring's likewise). Reach is by name, and errs towards reaching:

- the function reaches every top-level function or class whose name appears in its body,
  and whatever those reach;
- what runs when the module is imported reaches what it names, for every function:
  module-level statements (an alias `f = helper`), and of each definition its decorators,
  default values, annotations and base classes; a decorated function is reached (its
  decorator is handed it: `@HOOKS.append`), and so is every class (its body runs at
  import);
- a module that some module of the folder imports by its own name (`import this_module`,
  `from . import this_module`, `from this_module import f`) hands out its functions as
  attributes: then nothing is let off.

Code under `if __name__ == "__main__":` is not run by the grader. getattr, globals() and
the other ways to reach a function by a computed name are refused by the policy itself.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from grader.checks.policy.names import _main_guard
from grader.checks.policy.source import _read

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
MAX_MODULES = 200  # files of a folder read for imports of the module; past it, nothing let off


def unreached_lines(folder: Path, module: str, function: str) -> frozenset[int]:
    """Lines of `module`.py's top-level functions (decorators included) that `function`
    cannot reach; empty when the module cannot be read or parsed, has no such function,
    or is imported by name (then nothing is let off)."""
    tree = _parse(Path(folder) / f"{module}.py")
    if tree is None or _imported_by_name(Path(folder), module):
        return frozenset()
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            if node.name in defs:  # bound twice: the policy refuses it; let nothing off
                return frozenset()
            defs[node.name] = node
    if function not in defs:
        return frozenset()
    todo = [function]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) or (isinstance(node, _FUNCTIONS)
                                              and node.decorator_list):
            todo.append(node.name)
        if isinstance(node, _FUNCTIONS):
            for part in _run_at_definition(node):
                todo.extend(_names(part, defs))
        elif not (isinstance(node, ast.If) and _main_guard(node.test)):
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


def _parse(path: Path) -> ast.Module | None:
    source, _ = _read(path)
    if source is None:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _run_at_definition(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The parts of a function definition evaluated when it is defined."""
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return [*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d),
            *(a.annotation for a in every if a is not None and a.annotation is not None),
            *([node.returns] if node.returns is not None else [])]


def _imported_by_name(folder: Path, module: str) -> bool:
    """Does a module of the folder import `module` by its name (absolute or relative)?
    True too when the folder cannot be listed, a file cannot be parsed, or holds more
    than MAX_MODULES modules."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
    except OSError:
        return True
    if len(names) > MAX_MODULES:
        return True
    for name in names:
        tree = _parse(folder / name)
        if tree is None:
            return True
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(
                    alias.name.split(".")[-1] == module for alias in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and (
                    (node.module or "").split(".")[-1] == module
                    or any(alias.name == module for alias in node.names)):
                return True
    return False


def _names(node: ast.AST, defs: dict[str, ast.AST]) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs]
