"""The rules of kernel bodies: what numba compiles for the GPU, array ranks from use.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from grader.checks.policy.names import (
    CUDA_KERNEL,
    CUDA_KERNEL_CALLS,
    DANGER_BUILTINS,
    KERNEL_BUILTINS,
    KERNEL_EXCEPTIONS,
    MATH_KERNEL,
    NP_CONSTANTS,
    NP_KERNEL_UFUNCS,
    NP_SCALARS,
    NUMBA_TYPES,
    NUMBA_TYPES_MODULES,
    Ref,
    _short,
)


def _kernel_path(ref: Ref) -> bool:
    """Is this (non-local) name something a kernel may use (read or call)?"""
    module, rest = ref.module, ref.rest
    if module == "numba.cuda":
        if not rest:
            return True
        head = rest[0]
        if head in NUMBA_TYPES or head in CUDA_KERNEL_CALLS:
            return len(rest) == 1
        if head in CUDA_KERNEL:
            below = CUDA_KERNEL[head]
            if len(rest) == 1:
                return True
            return len(rest) == 2 and (below is None and not rest[1].startswith("_")
                                       or below is not None and rest[1] in below)
        return False
    if module in ("numba.cuda.random", "numba.cuda.libdevice"):
        return len(rest) <= 1 and all(not r.startswith("_") for r in rest)
    if module == "math":
        return len(rest) <= 1 and all(r in MATH_KERNEL for r in rest)
    if module == "cmath":
        return len(rest) <= 1 and all(not r.startswith("_") for r in rest)
    if module == "numpy":
        return len(rest) <= 1 and all(r in NP_SCALARS | NP_CONSTANTS | NP_KERNEL_UFUNCS
                                      for r in rest)
    if module == "numba":
        return len(rest) <= 1 and all(r in NUMBA_TYPES for r in rest)
    if module == "numba.types":
        return len(rest) <= 1 and all(not r.startswith("_") and r not in NUMBA_TYPES_MODULES
                                      for r in rest)
    return False


@dataclass
class _Scope:
    kind: str  # "module", "class", "function"
    names: set[str] = field(default_factory=set)  # local names (functions)
    params: set[str] = field(default_factory=set)  # the function's parameters
    self_name: str | None = None  # the method's self/cls, when not rebound
    method: bool = False  # a function directly in a class body
    name: str = ""  # a class's own name (super(Name, self))
    instances: set[str] = field(default_factory=set)  # locals bound only to OwnClass(...)


@dataclass
class _Kernel:
    name: str
    locals: set[str]
    ranks: dict[str, int]




def _launch(node: ast.AST) -> bool:
    """x[grid, block], x[grid, block, stream] or x[grid, block, stream, shared bytes]."""
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple)
            and 2 <= len(node.slice.elts) <= 4)


def _chain(node: ast.Subscript) -> tuple[str | None, int]:
    """(root name, number of indices) of a subscript chain such as A[i][k] or A[i, k]."""
    count, cur = 0, node
    while isinstance(cur, ast.Subscript):
        index = cur.slice
        count += len(index.elts) if isinstance(index, ast.Tuple) else 1
        cur = cur.value
    return (cur.id if isinstance(cur, ast.Name) else None), count


_VECTOR_TYPE = re.compile(r"(u?(char|short|int|long|longlong)|float|double)[1-4]"
                          r"|u?int(8|16|32|64)x[1-4]|float(32|64)x[1-4]")


def _vector_type(name: str) -> bool:
    """numba.cuda's vector types: float32x4, int2, uchar3, ..."""
    return _VECTOR_TYPE.fullmatch(name) is not None




class _KernelRules:
    """The visitor's kernel checks (a base of grader/checks/policy/visitor.py's _Visitor)."""

    def _kernel_facts(self, node, names: set[str]) -> _Kernel:
        """Array ranks from use: the most indices any subscript chain of a name takes."""
        ranks: dict[str, int] = {}
        inner = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Subscript):
                inner.add(id(sub.value))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript) and id(sub) not in inner:
                root, count = _chain(sub)
                if root is not None and root in names:
                    ranks[root] = max(ranks.get(root, 0), count)
        facts = _Kernel(node.name, names, ranks)
        # declared arrays and aliases, in order
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name):
                target, value = stmt.targets[0].id, stmt.value
                declared = self._declared_rank(value, facts)
                if declared:
                    ranks[target] = max(ranks.get(target, 0), declared)
            elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
                rank = self._rank_of(stmt.iter, facts)
                if rank > 1:
                    ranks[stmt.target.id] = max(ranks.get(stmt.target.id, 0), rank - 1)
        return facts

    def _declared_rank(self, value: ast.AST, facts: _Kernel) -> int:
        if isinstance(value, ast.Call):
            ref = self.resolve(value.func)
            if ref is not None and ref.module == "numba.cuda" and ref.rest in (
                    ("shared", "array"), ("local", "array")):
                shape = value.args[0] if value.args else next(
                    (k.value for k in value.keywords if k.arg == "shape"), None)
                return len(shape.elts) if isinstance(shape, ast.Tuple) else 1
            if ref is not None and ref.module == "numba.cuda" and ref.rest == (
                    "const", "array_like") and value.args:
                return self._rank_of(value.args[0], facts)
            return 0
        return self._rank_of(value, facts)

    def _rank_of(self, expr: ast.AST, facts: _Kernel) -> int:
        """Dimensions left of an array expression (0: an element or not an array)."""
        if isinstance(expr, ast.Name):
            return facts.ranks.get(expr.id, 0) if expr.id in facts.locals else 0
        if isinstance(expr, ast.Subscript):
            root, count = _chain(expr)
            if root is not None and root in facts.locals:
                return max(facts.ranks.get(root, 0) - count, 0)
        return 0

    def _array(self, expr: ast.AST) -> bool:
        return self.kernel is not None and self._rank_of(expr, self.kernel) > 0

    def _kernel_assign(self, targets: list[ast.AST], value: ast.AST) -> None:
        for target in targets:
            if isinstance(target, ast.Subscript) and (self._array(target)
                                                      or self._array(value)):
                self.flag("kernel-array", target)
                return

    def _kernel_read(self, node: ast.Name) -> None:
        """A Name read in a kernel (not a call target, not an attribute base of a module)."""
        name = node.id
        kernel = self.kernel
        if name in kernel.locals:
            return
        if name in self.info.bound:
            if name in self.info.constants or name in self.info.kernels:
                return
            ref = self.info.aliases.get(name)
            if ref is not None:
                ref = self.c._deref(ref)
                if ref.is_module and ref.module in ("numba.cuda", "math", "cmath", "numpy",
                                                    "numba", "numba.types",
                                                    "numba.cuda.random",
                                                    "numba.cuda.libdevice"):
                    return
                if (_kernel_path(ref) or self.c.is_constant_ref(ref)
                        or self.c.is_kernel_ref(ref)):
                    return
            self.flag("kernel-global", node, f"{name} in kernel {kernel.name}")
            return
        if name in KERNEL_BUILTINS or name in KERNEL_EXCEPTIONS or name in (
                "True", "False", "None"):
            return
        self.flag("kernel-global", node, f"{name} in kernel {kernel.name}")

    def _kernel_call(self, node: ast.Call) -> None:
        func, kernel = node.func, self.kernel
        allowed, array_args = False, False
        if isinstance(func, ast.Name):
            name = func.id
            if name in DANGER_BUILTINS and not self._local(name):
                return  # visit_Name reports it as a builtin
            self.handled.add(id(func))
            if name in kernel.locals:
                allowed = False
            elif name in self.info.bound:
                ref = self.info.aliases.get(name)
                ref = self.c._deref(ref) if ref is not None else None
                if name in self.info.kernels or self.c.is_kernel_ref(ref):
                    allowed = array_args = True
                elif ref is not None and _kernel_path(ref) and not ref.is_module:
                    allowed = True
            elif name in KERNEL_BUILTINS or name in KERNEL_EXCEPTIONS:
                allowed = True
                array_args = name == "len"
        elif isinstance(func, ast.Attribute):
            ref = self.resolve(func)
            if ref is not None and not ref.is_module and (
                    _kernel_path(ref) or self.c.is_kernel_ref(ref)):
                allowed = True
                array_args = self.c.is_kernel_ref(ref) or (
                    ref.module == "numba.cuda" and ref.rest[:1] in (("atomic",), ("const",)))
            else:
                self.handled.add(id(func))  # judged here: kernel-call, not kernel-attribute
        if not allowed:
            self.flag("kernel-call", node, f"{_short(node)} in kernel {kernel.name}")
            return
        ref = self.resolve(func)
        if ref is not None and ref.module == "numba.cuda" and ref.rest in (
                ("shared", "array"), ("local", "array")):
            shape = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "shape"), None)
            if shape is not None and not (self.c._constant(shape, self.info) and not any(
                    isinstance(n, ast.Name) and n.id in kernel.locals for n in ast.walk(shape))):
                self.flag("kernel-array", node, f"{_short(node)}: the shape is not a constant")
                return
        if not array_args:
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if self._array(arg):
                    self.flag("kernel-array", node, f"{_short(node)} in kernel {kernel.name}")
                    return
