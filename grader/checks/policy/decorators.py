"""The visitor's rules on decorators: which a graded function or class may carry."""

from __future__ import annotations

import ast

from grader.checks.policy.names import DECORATORS, Ref, _short


class _DecoratorRules:
    """A base of grader/checks/policy/visitor.py's _Visitor."""

    def _is_jit(self, decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return self.resolve(target) == Ref("numba.cuda", ("jit",))

    def _decorator(self, decorator: ast.expr, node, jit: list) -> None:
        if decorator in jit:
            if len(node.decorator_list) > 1:
                self.flag("decorator", decorator,
                          f"@{_short(decorator)} with other decorators on {node.name}")
            if isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if keyword.arg in (None, "link", "extensions"):
                        self.flag("jit", decorator, f"@{_short(decorator)}")
            return
        if self._allowed_decorator(decorator):
            return
        self.flag("decorator", decorator, f"@{_short(decorator)}")

    def _allowed_decorator(self, decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name):
            if target.id in ("staticmethod", "classmethod", "property") and not (
                    self._module_name(target.id) or self._local(target.id)):
                return True
            if (self._module_name(target.id) and target.id in self.info.functions
                    and target.id not in self.info.kernels):
                return True  # the submission's own decorator
        if (isinstance(target, ast.Attribute) and target.attr in ("setter", "getter",
                                                                  "deleter")
                and isinstance(target.value, ast.Name) and not isinstance(decorator,
                                                                           ast.Call)):
            return True
        ref = self.resolve(target)
        if ref is not None and ref.dotted() in DECORATORS:
            return True
        if ref is not None:
            found = self.c._sibling_def(ref)
            if found is not None and found[1] in found[0].functions and (
                    found[1] not in found[0].kernels):
                return True
        return False
