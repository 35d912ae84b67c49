"""Resolving names across the submission's modules: imports, aliases, kernels and
constants (a part of the checker, kept apart).
"""

from __future__ import annotations

import ast

from grader.checks.policy.kernels import _kernel_path
from grader.checks.policy.names import REFUSED, SUBMODULES, TOP_MODULES, Ref
from grader.checks.policy.source import _Module


class _Resolver:
    """The checker's name resolution (grader/checks/policy/checker.py uses it as a base)."""

    def _import_ref(self, dotted: str) -> Ref:
        """The module an absolute import path names, REFUSED if not allowed."""
        parts = dotted.split(".")
        if parts[0] not in TOP_MODULES:
            if self._is_sibling(parts[0], relative=False) and len(parts) == 1:
                return Ref(f"sibling:{parts[0]}")
            return REFUSED
        current = parts[0]
        if current == "collections" and len(parts) > 1 and parts[1] == "abc":
            return Ref("collections.abc") if len(parts) == 2 else REFUSED
        for part in parts[1:]:
            nxt = SUBMODULES.get(current, {}).get(part)
            if nxt is None or (nxt == "mpi4py.MPI" and self.part != "mpi"):
                return REFUSED
            current = nxt
        if current in ("nnkit", "mpi4py") or (current.startswith("mpi4py")
                                              and self.part != "mpi"):
            return REFUSED  # only as a path to nnkit.backend and mpi4py.MPI
        return Ref(current)

    def _from_ref(self, node: ast.ImportFrom, name: str) -> Ref:
        """What `from <node.module> import name` binds (REFUSED when not allowed)."""
        if node.level:
            if node.level > 1:
                return REFUSED
            if node.module is None:
                return Ref(f"sibling:{name}") if self._is_sibling(name, True) else REFUSED
            if "." in node.module or not self._is_sibling(node.module, True):
                return REFUSED
            return Ref(f"sibling:{node.module}", (name,))
        module = node.module or ""
        top = module.split(".")[0]
        if top not in TOP_MODULES:
            if "." not in module and self._is_sibling(module, relative=False):
                return Ref(f"sibling:{module}", (name,))
            return REFUSED
        if module in ("nnkit", "mpi4py"):
            base = Ref(module) if module != "mpi4py" or self.part == "mpi" else REFUSED
        else:
            base = self._import_ref(module)
        if base is REFUSED:
            return REFUSED
        sub = SUBMODULES.get(base.module, {}).get(name)
        if sub is not None:
            if sub == "mpi4py.MPI" and self.part != "mpi":
                return REFUSED
            return Ref(sub)
        if base.module in ("nnkit", "mpi4py"):
            return REFUSED
        return Ref(base.module, (name,))

    # resolving ---------------------------------------------------------------------------

    def _is_jit(self, decorator: ast.expr, aliases: dict[str, Ref]) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        ref = self._resolve_static(target, aliases)
        return ref is not None and ref == Ref("numba.cuda", ("jit",))

    def _resolve_static(self, node: ast.AST, aliases: dict[str, Ref],
                        depth: int = 0) -> Ref | None:
        """The Ref of a Name or attribute chain rooted at an import alias (module level)."""
        if depth > 50:
            return None
        if isinstance(node, ast.Name):
            ref = aliases.get(node.id)
            return self._deref(ref, depth) if ref is not None else None
        if isinstance(node, ast.Attribute):
            base = self._resolve_static(node.value, aliases, depth + 1)
            return self._extend(base, node.attr, depth) if base is not None else None
        return None

    def _extend(self, base: Ref, attr: str, depth: int = 0) -> Ref:
        if base is REFUSED:
            return REFUSED
        if base.is_module:
            sub = SUBMODULES.get(base.module, {}).get(attr)
            if sub is not None:
                return Ref(sub)
            if base.module.startswith("sibling:"):
                return self._deref(Ref(base.module, (attr,)), depth)
        return Ref(base.module, (*base.rest, attr))

    def _deref(self, ref: Ref, depth: int = 0) -> Ref:
        """sibling:X.name -> what X binds name to, when X imported it."""
        if (ref.module.startswith("sibling:") and len(ref.rest) >= 1 and depth < 20):
            other = self.modules.get(ref.module.split(":", 1)[1])
            if other is not None and ref.rest[0] in other.aliases:
                inner = self._deref(other.aliases[ref.rest[0]], depth + 1)
                for attr in ref.rest[1:]:
                    inner = self._extend(inner, attr, depth + 1)
                return inner
        return ref

    def _sibling_def(self, ref: Ref) -> tuple[_Module, str] | None:
        if ref.module.startswith("sibling:") and len(ref.rest) == 1:
            other = self.modules.get(ref.module.split(":", 1)[1])
            if other is not None:
                return other, ref.rest[0]
        return None

    def is_kernel_ref(self, ref: Ref | None) -> bool:
        found = self._sibling_def(ref) if ref is not None else None
        return found is not None and found[1] in found[0].kernels

    def is_constant_ref(self, ref: Ref | None) -> bool:
        found = self._sibling_def(ref) if ref is not None else None
        return found is not None and found[1] in found[0].constants

    def _constant(self, node: ast.AST, info: _Module) -> bool:
        """A constant expression: literals, tuples, arithmetic, constants and dtypes."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int | float | complex | str | bool | type(None))
        if isinstance(node, ast.Tuple):
            return all(self._constant(e, info) for e in node.elts)
        if isinstance(node, ast.UnaryOp):
            return self._constant(node.operand, info)
        if isinstance(node, ast.BinOp):
            return (not isinstance(node.op, ast.MatMult) and self._constant(node.left, info)
                    and self._constant(node.right, info))
        if isinstance(node, ast.BoolOp):
            return all(self._constant(v, info) for v in node.values)
        if isinstance(node, ast.Compare):
            return all(self._constant(v, info) for v in (node.left, *node.comparators))
        if isinstance(node, ast.IfExp):
            return all(self._constant(v, info) for v in (node.test, node.body, node.orelse))
        if isinstance(node, ast.Subscript):
            return self._constant(node.value, info) and self._constant(node.slice, info)
        if isinstance(node, ast.Name):
            if node.id in info.constants:
                return True
            ref = info.aliases.get(node.id)
            ref = self._deref(ref) if ref is not None else None
            return ref is not None and not ref.is_module and (self.is_constant_ref(ref)
                                                              or _kernel_path(ref))
        if isinstance(node, ast.Attribute):
            ref = self._resolve_static(node, info.aliases)
            return ref is not None and not ref.is_module and (_kernel_path(ref)
                                                              or self.is_constant_ref(ref))
        if isinstance(node, ast.Call):
            if node.keywords or not all(self._constant(a, info) for a in node.args):
                return False
            if isinstance(node.func, ast.Name) and node.func.id in (
                    "int", "float", "bool", "complex", "min", "max", "abs", "round"):
                return node.func.id not in info.bound
            ref = self._resolve_static(node.func, info.aliases)
            return ref is not None and _kernel_path(ref) and ref.module in (
                "numpy", "numba", "numba.types", "numba.cuda", "math")
        return False
