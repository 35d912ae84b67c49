"""Reading a submission's folder as Python would, and the facts of each module gathered
before checking (its scope, what it binds).
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.checks.policy.names import Ref, _main_guard
from grader.checks.policy.rules import MAX_BYTES

# ---------------------------------------------------------------------------------------
# Reading the folder


def _listing(folder: Path) -> dict[str, str]:
    """Entries of the folder: name -> 'file', 'link', 'dir' or 'other' (never followed)."""
    kinds = {}
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    if entry.is_symlink():
                        kinds[entry.name] = "link"
                    elif entry.is_dir(follow_symlinks=False):
                        kinds[entry.name] = "dir"
                    elif entry.is_file(follow_symlinks=False):
                        kinds[entry.name] = "file"
                    else:
                        kinds[entry.name] = "other"
                except OSError:
                    kinds[entry.name] = "other"
    except OSError:
        pass
    return kinds


SHADOW_SUFFIXES = tuple(dict.fromkeys((*importlib.machinery.EXTENSION_SUFFIXES,
                                       *importlib.machinery.BYTECODE_SUFFIXES)))


def _sibling_problem(name: str, kinds: dict[str, str]) -> str | None:
    """Why sibling `name` cannot be checked as name.py, or None."""
    kind = kinds.get(f"{name}.py")
    if name in kinds:
        return f"{name}/ is a package or file that Python imports instead of {name}.py"
    for suffix in SHADOW_SUFFIXES:
        if f"{name}{suffix}" in kinds:
            return f"{name}{suffix} would be imported instead of {name}.py"
    if kind == "link":
        return f"{name}.py is a link"
    if kind != "file":
        return f"{name}.py is not a regular file"
    return None


_INSTALLED: dict[str, bool] = {}


def _installed(name: str) -> bool:
    """Does this interpreter (the workers' own) have a top-level module of this name?
    Asked of the import system's finders, which only look at paths; any doubt is a yes."""
    if name not in _INSTALLED:
        try:
            _INSTALLED[name] = importlib.util.find_spec(name) is not None
        except Exception:  # noqa: BLE001 - a finder that fails: assume it is there
            _INSTALLED[name] = True
    return _INSTALLED[name]


def _read(path: Path) -> tuple[bytes | None, str | None]:
    """(source, None), or (None, why it is refused); (None, None) when missing."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(
            os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    except OSError as err:
        if path.is_symlink():
            return None, f"{path.name} is a link"
        return None, f"{path.name} cannot be read ({err.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"{path.name} is not a regular file"
        if info.st_size > MAX_BYTES:
            return None, f"{path.name} is larger than 1 MiB"
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            return None, f"{path.name} is larger than 1 MiB"
        return b"".join(chunks), None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------
# Per-module facts, gathered before checking


@dataclass
class _Module:
    name: str
    file: str
    tree: ast.Module
    aliases: dict[str, Ref] = field(default_factory=dict)  # module-level import bindings
    functions: dict[str, ast.AST] = field(default_factory=dict)  # module-level defs
    classes: set[str] = field(default_factory=set)
    kernels: set[str] = field(default_factory=set)  # module-level @cuda.jit functions
    constants: set[str] = field(default_factory=set)
    assigned: dict[str, ast.expr] = field(default_factory=dict)  # single module-level value
    bound: set[str] = field(default_factory=set)  # every name bound at module level
    siblings: list[str] = field(default_factory=list)
    rebinds: list[tuple[str, ast.AST]] = field(default_factory=list)


def _module_scope(body: list[ast.stmt]):
    """Statements run at module level (into if/for/while/try/with, not defs, classes or
    the __main__ block)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            if not _main_guard(stmt.test):
                yield from _module_scope(stmt.body)
            yield from _module_scope(stmt.orelse)
        elif isinstance(stmt, ast.For | ast.While | ast.AsyncFor):
            yield from _module_scope(stmt.body)
            yield from _module_scope(stmt.orelse)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            yield from _module_scope(stmt.body)
        elif isinstance(stmt, ast.Try) or (hasattr(ast, "TryStar")
                                           and isinstance(stmt, ast.TryStar)):
            yield from _module_scope(stmt.body)
            for handler in stmt.handlers:
                yield from _module_scope(handler.body)
            yield from _module_scope(stmt.orelse)
            yield from _module_scope(stmt.finalbody)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                yield from _module_scope(case.body)


def _stores(node: ast.AST):
    """Name nodes stored by an expression or statement, not entering nested scopes."""
    todo = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.Name) and isinstance(cur.ctx, ast.Store | ast.Del):
            yield cur
        for child in ast.iter_child_nodes(cur):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                              | ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp
                              | ast.GeneratorExp):
                todo.append(child)


def _named_binding(node: ast.AST) -> tuple[str, ...]:
    """The name an except clause or a match pattern binds (a string, not a Name node)."""
    if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
        return (node.name,)
    if isinstance(node, ast.MatchMapping) and node.rest:
        return (node.rest,)
    return ()


def _bound_in_function(func: ast.AST) -> set[str]:
    """Names local to a function (parameters and everything it binds), not looking into
    nested scopes; names declared global or nonlocal are left out."""
    names: set[str] = set()
    args = func.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            names.add(arg.arg)
    declared: set[str] = set()
    body = func.body if isinstance(func.body, list) else [func.body]
    todo = list(body)
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.Global | ast.Nonlocal):
            declared.update(cur.names)
        elif isinstance(cur, ast.Name) and isinstance(cur.ctx, ast.Store | ast.Del):
            names.add(cur.id)
        elif isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(cur.name)
            todo.extend(cur.decorator_list)
            continue
        elif isinstance(cur, ast.Import | ast.ImportFrom):
            for alias in cur.names:
                names.add((alias.asname or alias.name).split(".")[0])
        names.update(_named_binding(cur))
        if isinstance(cur, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            # a walrus in a comprehension binds the function's own scope
            names.update(n.target.id for n in ast.walk(cur) if isinstance(n, ast.NamedExpr)
                         and isinstance(n.target, ast.Name))
            continue
        if isinstance(cur, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(cur))
    return names - declared


def _own_instances(func: ast.AST, own_class: Callable[[str], bool]) -> set[str]:
    """Locals of `func` bound only by `name = C(...)` with `own_class(C)`: the
    submission's own objects (`ring = Ring(comm)`), whatever their methods are called."""
    good: dict[str, int] = {}
    stores: dict[str, int] = {}
    other: set[str] = set()
    args = func.args
    other.update(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                 args.vararg, args.kwarg) if a is not None)
    todo = list(func.body)
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.Assign) and len(cur.targets) == 1 and isinstance(
                cur.targets[0], ast.Name) and isinstance(cur.value, ast.Call) and isinstance(
                cur.value.func, ast.Name) and own_class(cur.value.func.id):
            good[cur.targets[0].id] = good.get(cur.targets[0].id, 0) + 1
        if isinstance(cur, ast.Name) and isinstance(cur.ctx, ast.Store | ast.Del):
            stores[cur.id] = stores.get(cur.id, 0) + 1
        elif isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            other.add(cur.name)
            continue
        elif isinstance(cur, ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal):
            other.update((getattr(a, "asname", None) or getattr(a, "name", a)).split(".")[0]
                         for a in cur.names)
        other.update(_named_binding(cur))
        if isinstance(cur, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(cur))
    return {name for name, count in good.items()
            if stores.get(name) == count and name not in other}
