"""The interpreter's tables reached through `sys`, a module the checker does not follow.

An import outside the allowed list (os, sys, ...) is a style note, and what the refused
module is then used for is left to the worker's audit hook. One use is singled out here:
`sys.modules` hands out every loaded module (ctypes, gc, weakref, the kit's own) without an
import statement, sys's import and tracing hooks change what the kit runs, and reference
counts and frames tell a call whether it is being checked; no kernel, network or ring
needs them. Kept apart from the visitor, which resolves only allowed
modules: this looks at the names `import sys` binds, wherever it stands.
"""

from __future__ import annotations

import ast

from grader.checks.policy.rules import Violation

SYS_TABLES = frozenset({
    "modules", "meta_path", "path_hooks", "path_importer_cache", "settrace", "setprofile",
    "addaudithook", "excepthook", "unraisablehook", "displayhook", "breakpointhook",
    "audit", "monitoring",
    # Who else holds an object, and whose frames are running: a call can tell from them
    # whether the grader keeps its inputs (the calls it records in full) and behave
    # honestly only then (red team: sys.getrefcount on a weight matrix).
    "getrefcount", "getallocatedblocks", "_getframe", "_getframemodulename",
    "_current_frames", "_current_exceptions", "gettrace", "getprofile",
})


def reaches(tree: ast.Module, file: str) -> list[Violation]:
    """`sys.modules` and the like in one module (rule "private": interpreter internals)."""
    names, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or "sys" for a in node.names if a.name == "sys"}
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and not node.level:
            found += [Violation("private", file, node.lineno, f"from sys import {a.name}")
                      for a in node.names if a.name in SYS_TABLES or a.name == "*"]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in SYS_TABLES
                and isinstance(node.value, ast.Name) and node.value.id in names):
            found.append(Violation("private", file, node.lineno,
                                   f"{node.value.id}.{node.attr}"))
    return found
