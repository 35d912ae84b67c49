"""The visitor of one module: imports, definitions, statements and calls (the rules on
expressions, attributes and kernels are its bases)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from grader.checks.policy.attributes import _AttributeRules
from grader.checks.policy.decorators import _DecoratorRules
from grader.checks.policy.expressions import _ExpressionRules, _method_names
from grader.checks.policy.kernels import _Kernel, _KernelRules, _launch, _Scope
from grader.checks.policy.names import (
    INTERNALS,
    MEMORY_ATTRS,
    NP_LITERAL_ONLY,
    PRODUCTS,
    REFUSED,
    SAFE_DUNDERS,
    TOP_MODULES,
    Ref,
    _main_guard,
    _short,
)
from grader.checks.policy.patterns import allowed_class_pattern
from grader.checks.policy.rules import Violation
from grader.checks.policy.source import (
    _bound_in_function,
    _Module,
    _own_instances,
    _sibling_problem,
    _stores,
)

if TYPE_CHECKING:  # the checker creates visitors: imported for the annotation only
    from grader.checks.policy.checker import _Checker


class _Visitor(_ExpressionRules, _AttributeRules, _DecoratorRules, _KernelRules,
               ast.NodeVisitor):
    def __init__(self, checker: _Checker, info: _Module, ring):
        self.c, self.info, self.part = checker, info, checker.part
        self.ring = ring  # None, "all", or a set of top-level names
        self.found: list[Violation] = []
        self.scopes: list[_Scope] = [_Scope("module")]
        self.kernel: _Kernel | None = None
        self.top: str | None = None  # the top-level def or class being visited
        self.annotation = 0  # inside an annotation
        self.decorator = 0  # inside a decorator expression
        self.handled: set[int] = set()  # node ids already judged by their parent
        self.local_aliases: list[dict[str, Ref]] = [{}]

    @property
    def gemm_or_net(self) -> bool:
        return self.part in ("gemm", "net")

    def run(self) -> None:
        self.visit(self.info.tree)

    def flag(self, rule: str, node: ast.AST, text: str | None = None) -> None:
        self.found.append(Violation(rule, self.info.file, getattr(node, "lineno", 0),
                                    text if text is not None else _short(node)))

    # names ---------------------------------------------------------------------------

    def _local(self, name: str) -> bool:
        """Bound in an enclosing function (so not a module name or a builtin)."""
        return any(s.kind == "function" and name in s.names for s in self.scopes[1:])

    def resolve(self, node: ast.AST) -> Ref | None:
        """Ref of a Name / attribute chain rooted at an import (function-level imports
        included), honouring local shadowing."""
        if isinstance(node, ast.Name):
            for aliases in reversed(self.local_aliases[1:]):
                if node.id in aliases:
                    return self.c._deref(aliases[node.id])
            if self._local(node.id):
                return None
            ref = self.info.aliases.get(node.id)
            return self.c._deref(ref) if ref is not None else None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return self.c._extend(base, node.attr) if base is not None else None
        return None

    def _module_name(self, name: str) -> bool:
        """A module-level name of this module (not shadowed by a local)."""
        return not self._local(name) and name in self.info.bound

    def _kernel_name(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name) and self._module_name(node.id):
            if node.id in self.info.kernels:
                return True
        ref = self.resolve(node)
        return ref is not None and self.c.is_kernel_ref(ref)

    # statements ------------------------------------------------------------------------

    def visit_If(self, node: ast.If) -> None:
        if _main_guard(node.test) and len(self.scopes) == 1:
            for child in node.orelse:  # the body is the script part: not run when graded
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        if self._kernel_refuses(node):
            return
        for alias in node.names:
            self.visit_alias(alias)
            ref = self.c._import_ref(alias.name)
            text = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
            if ref is REFUSED:
                self.flag(self._import_rule(alias.name), node, text)
                continue
            if ref.module.startswith("sibling:"):
                self._check_sibling(ref.module.split(":", 1)[1], node, text)
            if len(self.scopes) > 1:
                bound = alias.asname or alias.name.split(".")[0]
                self.local_aliases[-1][bound] = ref if alias.asname else (
                    Ref(f"sibling:{bound}") if ref.module.startswith("sibling:")
                    else Ref(bound))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if self._kernel_refuses(node):
            return
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name != "*":
                self.visit_alias(alias)
            text = f"from {module} import {alias.name}"
            if alias.name == "*":
                self.flag("star-import", node, text)
                continue
            ref = self.c._from_ref(node, alias.name)
            if ref is REFUSED:
                self.flag(self._import_rule(f"{node.module or ''}.{alias.name}"), node, text)
                continue
            if ref.module.startswith("sibling:"):
                self._check_sibling(ref.module.split(":", 1)[1], node, text)
                if alias.name.startswith("__"):
                    self.flag("private", node, text)
                continue
            if not ref.is_module:
                rule = self._module_attr(Ref(ref.module), ref.rest[0], node)
                if rule is not None:
                    self.flag(rule, node, text)
                    continue
            if len(self.scopes) > 1:
                self.local_aliases[-1][alias.asname or alias.name] = ref

    def _import_rule(self, dotted: str) -> str:
        parts = [p for p in dotted.split(".") if p]
        if not parts or parts[0] not in TOP_MODULES:
            return "import"
        if any(p.startswith("_") for p in parts[1:]):
            return "private"
        if parts and parts[0] == "numba":
            return "numba"
        if parts[:2] == ["nnkit", "backend"]:
            return "backend"
        if any(p in MEMORY_ATTRS or p == "ctypes" for p in parts[1:]):
            return "memory"
        if self.gemm_or_net and any(p in PRODUCTS for p in parts[1:]):
            return "product"
        if parts and parts[0] == "numpy" and self.gemm_or_net and len(parts) == 2:
            return "array-library"
        return "import"

    def _check_sibling(self, name: str, node: ast.AST, text: str) -> None:
        problem = _sibling_problem(name, self.c.kinds)
        if problem is not None:
            self.flag("file", node, f"{text} ({problem})")

    def _kernel_refuses(self, node: ast.AST) -> bool:
        if self.kernel is not None:
            self.flag("kernel-syntax", node)
            return True
        return False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def _function(self, node) -> None:
        if self._kernel_refuses(node):
            return
        parent = self.scopes[-1]
        if node.name.startswith("__") and node.name.endswith("__") and not (
                parent.kind == "class" and node.name in SAFE_DUNDERS):
            self.flag("private", node, f"def {node.name}")  # protocol hooks: __array__, ...
        at_top = len(self.scopes) == 1
        jit = [d for d in node.decorator_list if self._is_jit(d)]
        for decorator in node.decorator_list:
            self._decorator(decorator, node, jit)
        for decorator in node.decorator_list:
            if decorator in jit:  # cuda.jit as the decorator itself, not inside another
                self.decorator += 1
                self.visit(decorator)
                self.decorator -= 1
            else:
                self.visit(decorator)
        self._visit_signature(node)
        if jit and (not at_top or isinstance(node, ast.AsyncFunctionDef)):
            self.flag("jit", node, f"@cuda.jit on {node.name}, not a module-level function")
        names = _bound_in_function(node)
        args = node.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                  args.vararg, args.kwarg) if a is not None}
        scope = _Scope("function", names, params=params, method=parent.kind == "class")
        if scope.method and node.args.args and all(map(self._keeps_self, node.decorator_list)):
            first = (node.args.posonlyargs + node.args.args)[0].arg
            rebound = any(isinstance(n, ast.Name) and n.id == first
                          and isinstance(n.ctx, ast.Store | ast.Del) for n in ast.walk(node))
            scope.self_name = None if rebound else first
        elif not scope.method:
            scope = self._nested_scope(names, params)
        scope.instances = _own_instances(node, lambda name: (
            name not in names and self._own_class_name(name)))
        previous_top = self.top
        if at_top:
            self.top = node.name
        self.scopes.append(scope)
        self.local_aliases.append({})
        kernel_before = self.kernel
        if jit and at_top and node.name in self.info.kernels:
            self.kernel = self._kernel_facts(node, names)
            args = node.args
            if args.vararg or args.kwarg:
                self.flag("kernel-syntax", node, f"*args or **kwargs of kernel {node.name}")
        for stmt in node.body:
            self.visit(stmt)
        self.kernel = kernel_before
        self.local_aliases.pop()
        self.scopes.pop()
        self.top = previous_top

    def _nested_scope(self, names: set[str], params: set[str] | None = None) -> _Scope:
        """A nested def's, lambda's or comprehension's scope: it sees the self of the
        function around it as long as it does not rebind the name."""
        scope = _Scope("function", names, params=params or set())
        parent = self.scopes[-1]
        if parent.kind == "function" and parent.self_name not in (None, *names):
            scope.self_name = parent.self_name
        return scope

    def _visit_signature(self, node) -> None:
        args = node.args
        for default in (*args.defaults, *[d for d in args.kw_defaults if d is not None]):
            self.visit(default)
        self.annotation += 1
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                self.visit_arg(arg)
        if getattr(node, "returns", None) is not None:
            self.visit(node.returns)
        self.annotation -= 1

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self._kernel_refuses(node):
            return
        for decorator in node.decorator_list:
            if not self._allowed_decorator(decorator):
                self.flag("decorator", decorator, f"@{_short(decorator)}")
        for decorator in node.decorator_list:
            self.visit(decorator)
        for base in (*node.bases, *node.keywords):
            self.visit(base)
        previous_top = self.top
        if len(self.scopes) == 1:
            self.top = node.name
        self.scopes.append(_Scope("class", _method_names(node), name=node.name))
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()
        self.top = previous_top

    def visit_Lambda(self, node: ast.Lambda) -> None:
        if self._kernel_refuses(node):
            return
        self._visit_signature(node)
        self.scopes.append(self._nested_scope(_bound_in_function(node)))
        self.local_aliases.append({})
        self.visit(node.body)
        self.local_aliases.pop()
        self.scopes.pop()

    def _comprehension(self, node) -> None:
        if self._kernel_refuses(node):
            return
        self._methods_in_class_scope(node.generators[0].iter)  # run in the enclosing scope
        names = set()
        for gen in node.generators:
            names.update(n.id for n in _stores(gen.target))
        self.scopes.append(self._nested_scope(names))
        self.local_aliases.append({})
        self.generic_visit(node)
        self.local_aliases.pop()
        self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        self.annotation += 1
        self.visit(node.annotation)
        self.annotation -= 1
        if node.value is not None:
            self.visit(node.value)
            if self.kernel is not None:
                self._kernel_assign([node.target], node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._method_alias(node)
        self.generic_visit(node)
        if self.kernel is not None:
            self._kernel_assign(node.targets, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult) and self.gemm_or_net:
            self.flag("product", node, "the @= operator")
        if self.kernel is not None and (self._array(node.target) or self._array(node.value)):
            self.flag("kernel-array", node)

    def visit_Global(self, node: ast.Global) -> None:
        self._kernel_refuses(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._kernel_refuses(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        local = isinstance(node.cls, ast.Name) and self._local(node.cls.id)
        if not allowed_class_pattern(self.c, self.info, node, local):
            self.flag("builtin", node, f"case {_short(node.cls)}(...) on a class not the "
                                       "submission's own plain class (patterns.py)")
        for name in node.kwd_attrs:  # `case C(attr=...)` reads attributes by name
            if name.startswith("_") or name in INTERNALS:
                self.flag("private", node, f"{_short(node.cls)}({name}=...)")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and not self._local(func.id) and not (
                self._module_name(func.id)):
            if func.id == "super":
                self.handled.add(id(func))
                self._check_super(node)
            elif func.id == "type" and (len(node.args) != 1 or node.keywords):
                self.flag("builtin", node, f"type() with {len(node.args)} arguments")
            elif func.id == "hasattr" and len(node.args) == 2:
                # hasattr(A, "__cuda_array_interface__"): a device-array test, a bool only
                self.handled.add(id(node.args[1]))
        ref = self.resolve(func)
        if ref is not None and ref.module == "numpy" and len(ref.rest) == 1:
            name = ref.rest[0]
            if name in NP_LITERAL_ONLY and self.gemm_or_net and not (
                    node.args and self._literal(node.args[0])):
                self.flag("host-copy", node)
            if name == "ndarray" and (len(node.args) > 2 or any(
                    k.arg in (None, "buffer", "offset", "strides") for k in node.keywords)):
                self.flag("memory", node)
        if (self.gemm_or_net and isinstance(func, ast.Attribute) and func.attr == "get"
                and not node.args and not (ref is not None and ref.is_module)):
            self.flag("host-copy", node)
        if _launch(func) and self.kernel is None:
            target = func.value  # kernel[grid, block(, stream, shared bytes)](...)
            local = isinstance(target, ast.Name) and self._local(target.id)
            if not (local or self._kernel_name(target)):
                self.flag("launch", node, f"{_short(func)}(...) launches "
                                          f"{_short(target)}, not a @cuda.jit kernel")
        self._call_arguments(node, ref)
        for arg in (*node.args, *(k.value for k in node.keywords)):  # to a launch helper
            if self._kernel_name(arg):
                self.handled.add(id(arg))
        if self.kernel is not None:
            self._kernel_call(node)
        self.generic_visit(node)
