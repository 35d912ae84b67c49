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
- what the folder's modules that can run beside it (it, and those it imports) import
  from it by name (`from this_module import f`) is reached; one that binds the module
  itself (`import this_module`, `from . import this_module`) hands out all its functions
  as attributes: then nothing is let off. A module nothing imports (a student's own test
  script) never runs in a grading job.

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
    imported = _imported_names(Path(folder), module)
    if tree is None or imported is None:
        return frozenset()
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            if node.name in defs:  # bound twice: the policy refuses it; let nothing off
                return frozenset()
            defs[node.name] = node
    if function not in defs:
        return frozenset()
    todo = [function, *(name for name in imported if name in defs)]
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


def _imported_names(folder: Path, module: str) -> set[str] | None:
    """The names that the modules which can run beside `module` (it, and the folder's
    modules it imports, transitively) import from it (`from module import f`); None when
    one of them binds the module itself (`import module`, `from . import module`), which
    hands out all its functions, or cannot be read or parsed, or there are more than
    MAX_MODULES. A module nothing imports (a student's test script) never runs here."""
    try:
        present = {n[:-3] for n in os.listdir(folder) if n.endswith(".py")}
    except OSError:
        return None
    if len(present) > MAX_MODULES:
        return None
    names: set[str] = set()
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        tree = _parse(folder / f"{current}.py")
        if tree is None:
            return None
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top, last = alias.name.split(".")[0], alias.name.split(".")[-1]
                    if last == module:
                        return None
                    if top in present:
                        todo.append(top)
            elif isinstance(node, ast.ImportFrom):
                source = (node.module or "").split(".")[-1]
                if source == module:
                    if any(alias.name == "*" for alias in node.names):
                        return None
                    names.update(alias.name for alias in node.names)
                elif source in present:
                    todo.append(source)
                for alias in node.names:
                    if alias.name == module:
                        return None
                    if not node.module and alias.name in present:
                        todo.append(alias.name)
    return names


def _names(node: ast.AST, defs: dict[str, ast.AST]) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs]
