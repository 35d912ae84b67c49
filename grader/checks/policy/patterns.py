"""Class patterns in `match` statements: which classes a graded module may match on.

`case C(x=p)` and `case C(p)` read attributes of the subject (by name, or as C's
__match_args__ lists them) once isinstance(subject, C) holds, and isinstance answers what
C's metaclass says. A library class or `object` matches anything (red team: `case
object(modules=m)` on sys was sys.modules, `case object(getattr=g)` on builtins was
getattr), an ABC anything registered with it, a runtime Protocol anything that has its
names, a class a decorator replaced whatever the decorator returned. So a pattern with
sub-patterns is allowed on the submission's own plain classes only: defined at the top of
one of its modules, with no metaclass, no decorator but @dataclass and @total_ordering,
and bases among its own plain classes, NamedTuple, the enum classes and a few builtins.
A builtin type with one positional pattern (`case int(n)`) binds the subject itself.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from grader.checks.policy.names import Ref

if TYPE_CHECKING:  # the checker and its modules: imported for the annotations only
    from grader.checks.policy.checker import _Checker
    from grader.checks.policy.source import _Module

PLAIN_BASES = frozenset({Ref("typing", ("NamedTuple",)),
                         *(Ref("enum", (n,)) for n in ("Enum", "IntEnum", "Flag", "IntFlag",
                                                      "StrEnum"))})
PLAIN_DECORATORS = frozenset({Ref("dataclasses", ("dataclass",)),
                              Ref("functools", ("total_ordering",))})
BUILTIN_BASES = frozenset({"object", "tuple", "Exception", "ValueError", "RuntimeError"})
# Builtin types whose one positional pattern is the subject itself.
SELF_MATCHING = frozenset({"int", "float", "complex", "str", "bytes", "bool", "tuple",
                           "list", "dict", "set", "frozenset"})
MAX_DEPTH = 10  # base classes followed, past which a class is not plain


def allowed_class_pattern(checker: _Checker, info: _Module, node: ast.MatchClass,
                          local: bool) -> bool:
    """May this module match on `node.cls` with these sub-patterns? `local`: the class's
    name is bound in an enclosing function (then it could be anything)."""
    if not node.patterns and not node.kwd_attrs:
        return True  # isinstance alone reads nothing
    cls = node.cls
    if isinstance(cls, ast.Name) and not local and cls.id not in info.bound:
        return (cls.id in SELF_MATCHING and len(node.patterns) == 1
                and not node.kwd_attrs)
    return not local and _plain(checker, info, cls, 0)


def plain_class(checker: _Checker, info: _Module, cls: ast.AST) -> bool:
    """Is `cls` (a name or a sibling module's attribute, read in `info`'s module) one of
    the submission's own plain classes?"""
    return _plain(checker, info, cls, 0)


def defined_names(checker: _Checker, info: _Module, cls: ast.AST, depth: int = 0
                  ) -> frozenset[str]:
    """Names the body of `cls`, an own plain class, and of its own plain bases define
    (methods, class attributes, fields); empty for any other class. What a class gets from
    Enum, NamedTuple or a builtin base is not its own: Enum's _convert_ read and wrote any
    loaded module's globals (review)."""
    if depth > MAX_DEPTH or not _plain(checker, info, cls, 0):
        return frozenset()
    if not (isinstance(cls, ast.Name) and cls.id in info.classes):
        ref = checker._resolve_static(cls, info.aliases)
        found = checker._sibling_def(ref) if ref is not None else None
        return (defined_names(checker, found[0], ast.Name(id=found[1]), depth + 1)
                if found is not None else frozenset())
    definition = next(n for n in info.tree.body
                      if isinstance(n, ast.ClassDef) and n.name == cls.id)
    names = set(body_names(definition))
    for base in definition.bases:
        names |= defined_names(checker, info, base, depth + 1)
    return frozenset(names)


def body_names(definition: ast.ClassDef) -> set[str]:
    """Names a class body binds: its methods, class attributes and fields."""
    names: set[str] = set()
    for stmt in definition.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(stmt.name)
        targets = (stmt.targets if isinstance(stmt, ast.Assign) else
                   [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _plain(checker: _Checker, info: _Module, cls: ast.AST, depth: int) -> bool:
    """Is `cls`, read in `info`'s module, a plain class of the submission's own?"""
    if depth > MAX_DEPTH:
        return False
    if isinstance(cls, ast.Name) and cls.id in info.classes:
        defs = [n for n in info.tree.body if isinstance(n, ast.ClassDef) and n.name == cls.id]
        if len(defs) != 1 or any(name == cls.id for name, _ in info.rebinds):
            return False
        definition = defs[0]
        decorators = [d.func if isinstance(d, ast.Call) else d for d in definition.decorator_list]
        if definition.keywords or not all(checker._resolve_static(d, info.aliases)
                                          in PLAIN_DECORATORS for d in decorators):
            return False
        return all(_plain_base(checker, info, base, depth) for base in definition.bases)
    ref = checker._resolve_static(cls, info.aliases)
    found = checker._sibling_def(ref) if ref is not None else None
    return found is not None and _plain(checker, found[0], ast.Name(id=found[1]), depth + 1)


def _plain_base(checker: _Checker, info: _Module, base: ast.AST, depth: int) -> bool:
    if isinstance(base, ast.Name) and base.id in BUILTIN_BASES and base.id not in info.bound:
        return True
    if checker._resolve_static(base, info.aliases) in PLAIN_BASES:
        return True
    return _plain(checker, info, base, depth + 1)
