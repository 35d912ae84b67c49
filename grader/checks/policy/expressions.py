"""The visitor's rules on expressions and names: slices, operators, subscripts, bare names.
"""

from __future__ import annotations

import ast

from grader.checks.policy.kernels import _launch
from grader.checks.policy.names import (
    BINDABLE_DUNDERS,
    DANGER_BUILTINS,
    DEEPCOPY,
    FORMAT_PRIVATE,
    KERNEL_REFUSED,
    MEMORY_DUNDERS,
    PLAIN_DUNDERS,
    REFUSED,
    SAFE_DUNDERS,
    Ref,
    _short,
    mpi_class,
)


class _ExpressionRules:
    """A base of grader/checks/policy/visitor.py's _Visitor."""

    def generic_visit(self, node: ast.AST) -> None:
        if self.kernel is not None and isinstance(node, KERNEL_REFUSED):
            self.flag("kernel-syntax", node)
            return
        super().generic_visit(node)

    # expressions ---------------------------------------------------------------------

    def visit_Slice(self, node: ast.Slice) -> None:
        if self.kernel is not None:
            self.flag("kernel-slice", node, f"[{_short(node)}]")
            return
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.gemm_or_net:
            self.flag("product", node, f"the @ operator: {_short(node)}")
        self.generic_visit(node)
        if self.kernel is not None and (self._array(node.left) or self._array(node.right)):
            self.flag("kernel-array", node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        self.generic_visit(node)
        if self.kernel is not None and self._array(node.operand):
            self.flag("kernel-array", node)

    def visit_Compare(self, node: ast.Compare) -> None:
        self.generic_visit(node)
        if self.kernel is not None and any(self._array(v)
                                           for v in (node.left, *node.comparators)):
            self.flag("kernel-array", node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self.generic_visit(node)
        if self.kernel is not None and any(self._array(v) for v in node.values):
            self.flag("kernel-array", node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load) and self._mpi_type_lookup(node.value):
            self.handled.add(id(node.value))  # MPI._typedict[x.dtype.char]: read, never stored
        if _launch(node) and self._kernel_name(node.value):
            self.handled.add(id(node.value))  # kernel[grid, block]: the kernel, configured
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if self.kernel is not None and any(isinstance(item, ast.Constant)
                                           and item.value is Ellipsis for item in index):
            self.flag("kernel-slice", node, f"{_short(node)} (...)")
        elif (self.gemm_or_net or self.kernel is not None) and not self._typing(node.value):
            for item in index:
                ref = self.resolve(item)
                if (isinstance(item, ast.Constant) and item.value is None) or (
                        ref is not None and ref.dotted() == "numpy.newaxis"):
                    self.flag("array-library" if self.kernel is None else "kernel-slice",
                              node, f"{_short(node)} (a new axis)")
                    break
        if isinstance(node.ctx, ast.Store | ast.Del):
            root, through_attribute = node.value, False
            while isinstance(root, ast.Attribute | ast.Subscript):
                through_attribute |= isinstance(root, ast.Attribute)
                root = root.value
            if isinstance(root, ast.Name) and ((self._imported(root.id)
                                                and not self._own_state(root.id)) or (
                    through_attribute and self._parameter(root.id))):
                self.flag("module-assign", node)
        self.generic_visit(node)

    def _mpi_type_lookup(self, value: ast.expr) -> bool:
        """`MPI._typedict`: mpi4py's table of datatypes by NumPy type character, a common
        idiom (`MPI._typedict[a.dtype.char]`) although private; only indexed."""
        if not (isinstance(value, ast.Attribute) and value.attr == "_typedict"):
            return False
        ref = self.resolve(value.value)
        return ref is not None and ref.is_module and ref.module == "mpi4py.MPI"

    def _typing(self, base: ast.AST) -> bool:
        """A type expression such as Callable[..., None] or tuple[int, None]."""
        if self.annotation:
            return True
        if isinstance(base, ast.Name) and base.id in (
                "list", "tuple", "dict", "set", "frozenset", "type") and not (
                self._local(base.id) or self._module_name(base.id)):
            return True
        ref = self.resolve(base)
        return ref is not None and ref.module in ("typing", "collections.abc",
                                                  "numpy.typing")

    def _literal(self, node: ast.AST) -> bool:
        """Numbers and strings, in lists and tuples: host data that is not an operand."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.List | ast.Tuple):
            return all(self._literal(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp):
            return self._literal(node.operand)
        if isinstance(node, ast.BinOp):
            return self._literal(node.left) and self._literal(node.right)
        return isinstance(node, ast.Name) and node.id in self.info.constants and (
            self._module_name(node.id))

    def _parameter(self, name: str) -> bool:
        """A parameter of the enclosing function (not self/cls): an object the grader
        handed over (an array, the communicator, gemm)."""
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                return name in scope.params and name != scope.self_name
        return False

    def visit_Constant(self, node: ast.Constant) -> None:
        """Strings that reach around the policy: the name of an array interface (a dict
        key that makes any object an array over any address) and a format field that looks
        up an underscore attribute ('{0.__array_interface__[data][0]}'.format(a))."""
        if id(node) in self.handled:
            return
        if isinstance(node.value, str) and (node.value.strip() in MEMORY_DUNDERS
                                            or FORMAT_PRIVATE.search(node.value)):
            self.flag("private", node, repr(node.value)[:60])

    def _call_arguments(self, node: ast.Call, ref: Ref | None) -> None:
        """Arguments judged by their call (`ref`: what its function stands for). A dunder
        keyword is refused: SimpleNamespace(__array_interface__=...) is an array over any
        address, by a keyword the attribute rules never see. The communicator classes in
        the classes of the builtin isinstance or issubclass (`isinstance(comm,
        MPI.Intracomm)`) are let through: such a test hands out a bool, not the class."""
        for keyword in node.keywords:
            if keyword.arg and keyword.arg.startswith("__") and keyword.arg.endswith("__"):
                self.flag("private", keyword, f"{keyword.arg}=")
        func = node.func
        if isinstance(func, ast.Name) and func.id == "property" and self.scopes[
                -1].kind == "class" and not self._module_name(func.id):
            for arg in node.args:  # x = property(get_x, set_x): the worker checks those
                if isinstance(arg, ast.Name):
                    self.handled.add(id(arg))
        if ref == DEEPCOPY and len(node.args) == 1 and not node.keywords \
                and not isinstance(node.args[0], ast.Starred):
            self.handled.add(id(func))  # deepcopy(x): no memo of ids handed in or out
        if not (isinstance(func, ast.Name) and func.id in ("isinstance", "issubclass")
                and len(node.args) == 2 and not node.keywords
                and not (self._local(func.id) or self._module_name(func.id))):
            return
        classes = node.args[1]
        for cls in classes.elts if isinstance(classes, ast.Tuple) else [classes]:
            if isinstance(cls, ast.Attribute | ast.Name) and mpi_class(self.resolve(cls)):
                self.handled.add(id(cls))

    def _own_state(self, name: str) -> bool:
        """A class of the module's own, or a plain function of its own (no decorator: not
        a kernel): its attributes are the module's own state, a launch counter or a cache
        (`Profile.launches += 1`, `_scratch.cache = {}`), which nothing of the grader's
        reads."""
        if self._local(name):
            return False
        if name in self.info.classes:
            return True
        node = self.info.functions.get(name)
        return isinstance(node, ast.FunctionDef) and not node.decorator_list

    def _imported(self, name: str) -> bool:
        """A module-level import, def or class name (not shadowed)."""
        if self._local(name):
            return any(name in a for a in self.local_aliases[1:])
        return name in self.info.aliases or name in self.info.functions or (
            name in self.info.classes)

    def _methods_in_class_scope(self, node: ast.AST) -> None:
        """A comprehension's first iterable runs in the class body: `[f for f in (grab,)]`
        keeps a method as a value there too."""
        if self.scopes[-1].kind == "class":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and (
                        sub.id in self.scopes[-1].names):
                    self.flag("private", sub, f"{sub.id} (a method of the class used as a "
                                              "value in its body)")

    def _method_alias(self, node: ast.Assign) -> None:
        """`__call__ = forward` in a class body: another name for the same method (the
        worker checks each name's first argument alike)."""
        if self.scopes[-1].kind == "class" and isinstance(node.value, ast.Name) and all(
                isinstance(t, ast.Name) for t in node.targets):
            self.handled.add(id(node.value))

    def visit_Name(self, node: ast.Name) -> None:
        if id(node) in self.handled:
            return
        name = node.id
        if isinstance(node.ctx, ast.Load) and self.scopes[-1].kind == "class" and (
                name in self.scopes[-1].names):
            # staticmethod(grab), (grab,), partialmethod(grab), a default `f=grab`: the
            # function, kept before the class is built, escapes the check of its first
            # argument (grader/worker/sealing.py) and lets `self._x` read anything.
            self.flag("private", node, f"{name} (a method of the class used as a value in "
                                       "its body)")
            return
        if isinstance(node.ctx, ast.Load):
            if name in DANGER_BUILTINS and not self._local(name):
                self.flag("builtin", node, name)
                return
            if name.startswith("__") and name.endswith("__") and name not in PLAIN_DUNDERS:
                self.flag("private", node, name)
                return
            if name == "super" and not self._local(name):
                self.flag("builtin", node, "super used outside a method call")
                return
            ref = self.resolve(node)
            if ref is not None and ref is not REFUSED:
                if mpi_class(ref) and not self.annotation:  # `from mpi4py.MPI import Comm`
                    self.flag("mpi-comm", node, name)
                    return
                if ref == DEEPCOPY:  # other than as deepcopy(x), above
                    self.flag("builtin", node, f"{name} (deepcopy but in a one-argument call)")
                    return
                if ref == Ref("numba.cuda", ("jit",)) and not self.decorator:
                    self.flag("jit", node, name)
                    return
                if ref.is_module and not self.annotation:
                    self.flag("module-value", node, name)
                    return
            if self._kernel_name(node) and self.kernel is None and not self.decorator:
                self.flag("launch", node, f"{name} (a kernel used as a value)")
                return
            if self.kernel is not None:
                self._kernel_read(node)
        elif name.startswith("__") and name.endswith("__") and name not in BINDABLE_DUNDERS \
                and not (name in SAFE_DUNDERS and self.scopes[-1].kind == "class"):
            self.flag("private", node, name)  # (`__radd__ = __add__` in a class: a method)

    def visit_arg(self, node: ast.arg) -> None:
        if node.arg.startswith("__") and node.arg.endswith("__"):
            self.flag("private", node, node.arg)
        if node.annotation is not None:
            self.visit(node.annotation)

    def visit_alias(self, node: ast.alias) -> None:
        bound = node.asname or node.name.split(".")[0]
        if bound.startswith("__") and bound.endswith("__") and bound != "__future__":
            self.flag("private", node, bound)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name and node.name.startswith("__") and node.name.endswith("__"):
            self.flag("private", node, node.name)
        self.generic_visit(node)


def _method_names(node: ast.ClassDef) -> set[str]:
    """The functions defined in a class's body (its scope's names, for the rule on a
    method used as a value there)."""
    return {s.name for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
