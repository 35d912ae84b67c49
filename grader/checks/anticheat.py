"""Keeping hand-written code hand-written: how the grader knows the submission did the work.

Layers, each reported in the feedback with the line of the submission it concerns:

- in the grader, before the run, on the source (`scan` here for library matrix products;
  grader/checks/policy/ for what graded modules may import and touch at all);
- in the worker, an audit hook the submission cannot remove (grader/worker/guard.py):
  ctypes, gc walks, frame access, other processes, files outside its folder;
- in the worker, library matrix products trapped at run time for a clear message
  (grader/worker/traps.py), and trusted modules photographed and compared before any
  result is written (grader/worker/tamper.py);
- in the worker, every kernel a graded call launches is recorded and, for the cases the
  grader picks, replayed from the call's inputs (grader/worker/launches.py): a result
  counts only if the submission's own kernels reproduce it.

The static scan below searches the AST of the kernel's module and of the submission's
modules it imports for the `@` operator, library attributes and imported names such as
matmul, dot, einsum, tensordot or cublas (a module's, or an array's `.dot`: not the
submission's own functions and fields of those names), their names looked up as strings
(getattr, a module's `__dict__`), and imports of libraries that provide them. Code under
`if __name__ == "__main__":` is not graded and not scanned.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.worker.traps import PRODUCTS, RECORD, Finding
from grader.worker.traps import library as _library

__all__ = ["RECORD", "Finding", "PolicyVerdict", "policy_verdict", "read_hits", "scan",
           "summary"]

# ---------------------------------------------------------------------------------------
# Static scan (in the grader)


# Methods of NumPy's and CuPy's arrays that compute a product (`A.dot(B)`): flagged on
# any object, since what a name holds is not known from the source.
ARRAY_PRODUCTS = frozenset({"dot", "__matmul__", "__rmatmul__", "__imatmul__"})
# Calls that turn a string into an attribute or a module: a product's name given to one
# of them is a product reached by name (most are refused by the policy already).
BY_NAME = frozenset({"getattr", "attrgetter", "methodcaller", "import_module", "__import__",
                     "__getattribute__", "getattr_static", "find_spec"})


class _Scanner(ast.NodeVisitor):
    """Library products in one module. Names are judged by where they come from: the
    submission's own modules may call their functions `dot` and their fields `inner`, and
    a string is a product's name only where it is looked up by name."""

    def __init__(self, file: str, own: Callable[[str], bool]):
        self.file, self.findings = file, []
        self.own = own  # whether a module name is one of the submission's
        self.local_imports: list[str] = []
        self.modules: dict[str, bool] = {}  # name bound by an import -> is the submission's

    def _add(self, what: str, node: ast.AST) -> None:
        self.findings.append(Finding(what, self.file, getattr(node, "lineno", 0)))

    def visit_Module(self, node: ast.Module) -> None:
        for child in ast.walk(node):  # bindings first: an import may follow its use
            if isinstance(child, ast.Import):
                for alias in child.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.modules[bound] = self.own(alias.name.split(".")[0])
            elif isinstance(child, ast.ImportFrom):
                mine = child.level > 0 or self.own((child.module or "").split(".")[0])
                for alias in child.names:
                    self.modules[alias.asname or alias.name] = mine
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
                and test.left.id == "__name__" and any(
                    isinstance(c, ast.Constant) and c.value == "__main__"
                    for c in test.comparators)):
            for child in node.orelse:  # the `if` body is the script part: not graded
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self._add("the @ operator", node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult):
            self._add("the @= operator", node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in PRODUCTS:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            mine = self.modules.get(root.id) if isinstance(root, ast.Name) else None
            # A module's attribute (np.dot, cupy.matmul) or an array's product method;
            # not a function or field of the submission's own (helpers.dot, shape.inner).
            if mine is False or (mine is None and node.attr in ARRAY_PRODUCTS):
                self._add(f"{_dotted(node)}", node)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _library(alias.name):
                self._add(f"import {alias.name}", node)
            self.local_imports.append(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0 and _library(module):
            self._add(f"from {module} import ...", node)
        mine = node.level > 0 or self.own(module.split(".")[0])
        for alias in node.names:
            if (alias.name in PRODUCTS and not mine) or (
                    node.level == 0 and _library(f"{module}.{alias.name}")):
                self._add(f"from {'.' * node.level}{module} import {alias.name}", node)
        if node.level > 0:
            if module:
                self.local_imports.append(module)
            else:
                self.local_imports.extend(a.name for a in node.names)
        elif module:
            self.local_imports.append(module)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in BY_NAME:
            for arg in node.args:
                if isinstance(arg, ast.Constant) and arg.value in PRODUCTS:
                    self._add(f"the string {arg.value!r}", arg)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        # A module's table by a product's name: np.__dict__["dot"], vars(np)["matmul"].
        table = node.value
        by_table = (isinstance(table, ast.Attribute) and table.attr == "__dict__") or (
            isinstance(table, ast.Call) and getattr(table.func, "id", "") in ("vars", "globals"))
        key = node.slice
        if by_table and isinstance(key, ast.Constant) and key.value in PRODUCTS:
            self._add(f"the string {key.value!r}", key)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _library(node.value):
            self._add(f"the string {node.value!r}", node)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return "(...)"


def scan(folder: Path, module: str) -> list[Finding]:
    """Library matrix products in `module` of the submission folder and in the modules of
    the folder it imports, transitively. A module that does not parse, or is nested too
    deeply to be parsed, yields nothing (the worker reports the syntax error, the policy
    the nesting)."""
    from grader import safe_io

    folder = Path(folder)

    def own(name: str) -> bool:  # a module of the submission's (a file beside the graded)
        return (bool(name) and name.isidentifier() and (folder / f"{name}.py").is_file()
                and not installed(name))

    findings: list[Finding] = []
    todo, seen = [module], set()
    while todo:
        name = todo.pop()
        path = folder / f"{name}.py"
        if name in seen or path.is_symlink() or not path.is_file():
            continue
        seen.add(name)
        scanner = _Scanner(path.name, own)
        try:  # a regular file within what jobs get (1 MiB, grader/submissions.py)
            text = safe_io.read_bytes(path, 1 << 20).decode(errors="replace")
            scanner.visit(ast.parse(text, filename=str(path)))
        except (SyntaxError, ValueError, OSError):
            continue
        except (RecursionError, MemoryError):
            # Nested deeper than the parser or the visitor goes: the policy fails such a
            # module ("nested too deeply to be checked"); here it must not stop the item.
            continue
        findings += scanner.findings
        todo += [m.split(".")[0] for m in scanner.local_imports]
    return findings


@functools.cache
def installed(name: str) -> bool:
    """Is `name` a module the worker imports from elsewhere than the submission (the
    standard library, NumPy, the kit)? A submission's file of that name, numpy.py say, is
    never what its `import numpy` gets: the worker puts the submission last on the path.
    Taking it for the submission's own would hide `numpy.matmul` from the scan."""
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def read_hits(outdir: Path, name: str = RECORD) -> list[Finding]:
    """What the worker's traps recorded in outdir/name (a malformed line is skipped)."""
    from grader import safe_io

    hits = []
    try:  # at most 100 lines are used: 256 KiB of them is plenty
        data, _ = safe_io.read_head(Path(outdir) / name, 256 << 10)
    except (OSError, ValueError):
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    for line in lines[:100]:
        try:
            data = json.loads(line)
            hits.append(Finding(safe_io.clean_text(data["what"], 200),
                                safe_io.clean_text(data["file"], 200), int(data["line"])))
        except (ValueError, KeyError, TypeError):
            continue
    return hits


def summary(findings: list[Finding], limit: int = 3) -> str:
    """'numpy.matmul (gemm_1_naive.py, line 12); ...' without repeats."""
    unique = list(dict.fromkeys(f.describe() for f in findings))
    more = f" and {len(unique) - limit} more" if len(unique) > limit else ""
    return "; ".join(unique[:limit]) + more


# ---------------------------------------------------------------------------------------
# The policy for graded modules (grader/checks/policy/), as it counts in an item


@dataclass
class PolicyVerdict:
    failure: str  # why the item fails ('' if it does not)
    note: str  # breaches of style rules, reported only ('' if none)
    found: list[str]  # every breach, described, for the report's figures


def policy_verdict(folder: Path, module: str, part: str, mode: str,
                   notes_only: frozenset[str] = frozenset(),
                   note_lines: frozenset[int] | None = None) -> PolicyVerdict:
    """The policy's breaches in `module` of the (private copy of the) submission. mode
    "enforce": cheating rules fail the item, style rules and the rules in `notes_only` are
    notes; "strict": every breach fails it; "report": none does. With `note_lines`, a rule
    of `notes_only` is a note only on those lines of `module`.py (elsewhere it fails)."""
    from grader.checks import policy

    found = policy.check(folder, module, part)
    if not found:
        return PolicyVerdict("", "", [])

    def noted(v: policy.Violation) -> bool:
        return v.rule in notes_only and (note_lines is None or (
            v.file == f"{module}.py" and v.line in note_lines))

    failing = [v for v in found if mode == "strict" or (
        mode == "enforce" and policy.is_cheat(v) and not noted(v))]
    noted = [v for v in found if v not in failing]
    failure = ("the source breaks the rules for graded code: " + policy.summary(failing)
               if failing else "")
    note = ("note, not counted here: the source does not follow the kit's style rules: "
            + policy.summary(noted) if noted else "")
    return PolicyVerdict(failure, note, [v.describe() for v in found])
