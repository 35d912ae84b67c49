"""The visitor's rules on attributes: private names, interpreter internals, module members.
"""

from __future__ import annotations

import ast
import functools

from grader.checks.policy.kernels import _kernel_path, _vector_type
from grader.checks.policy.names import (
    ARRAY_PRODUCTS,
    ATTR_BUILTINS,
    BACKEND_BY_PART,
    COMM_DENY,
    CONTEXT_ATTRS,
    COUNTING,
    CUDA_HOST,
    CUDA_KERNEL,
    CUDA_KERNEL_CALLS,
    CUDA_SUBMODULES,
    DANGER_BUILTINS,
    DANGER_MODULES,
    DATATYPE_CTORS,
    HELPER_GETATTR,
    HELPER_MODULE_ATTRS,
    HELPERS,
    HOST_COPIES,
    INTERNALS,
    KERNEL_VALUE_ATTRS,
    MEMORY_ATTRS,
    MPI_CLASSES,
    MPI_DENY,
    MPI_MEMORY,
    NAME_DUNDERS,
    NAMEDTUPLE_API,
    NP_HOST_OK,
    NUMBA_TYPES,
    NUMBA_TYPES_MODULES,
    NUMPY_DENY,
    NUMPY_SUBMODULES,
    PLAIN_DUNDERS,
    PRODUCTS,
    REDUCTIONS,
    REFUSED,
    SAFE_DUNDERS,
    SELF_KEEPING,
    SUBMODULES,
    Ref,
    is_collective,
    mpi_class,
)
from grader.checks.policy.patterns import body_names, defined_names

# Names of the language's escape hatches that are also a class's everyday method names
# (`net.eval(X)`, `plan.compile()`, `log.open()`): allowed on self and where the
# submission's own classes define them (the object is then most likely its own; the audit
# hook judges what any call opens or compiles).
OWN_METHOD_NAMES = frozenset({"eval", "compile", "open"})


class _AttributeRules:
    """A base of grader/checks/policy/visitor.py's _Visitor."""

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = node.value
        if node.attr in NAME_DUNDERS and isinstance(base, ast.Attribute) and (
                base.attr == "__class__"):  # self.__class__.__name__: a string, not the class
            self.handled.add(id(base))
            self.visit(base.value)
            return
        before = len(self.found)
        if isinstance(base, ast.Name):
            self.handled.add(id(base))
            self._attribute_base(base)
        else:
            self.visit(base)
        if len(self.found) > before or id(node) in self.handled:
            return  # one finding per chain
        if isinstance(node.ctx, ast.Store | ast.Del):
            root = base
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name) and ((self._imported(root.id)
                                                and not self._own_state(root.id))
                                               or self._parameter(root.id)):
                self.flag("module-assign", node)
                return
        rule = self._attribute_rule(node)
        if rule is not None:
            self.flag(rule, node)

    def _attribute_base(self, base: ast.Name) -> None:
        """A Name used as `name.attr`: only the checks that do not concern its use as a
        value."""
        name = base.id
        if name in DANGER_BUILTINS and not self._local(name):
            self.flag("builtin", base, name)
        elif name.startswith("__") and name.endswith("__") and name not in PLAIN_DUNDERS:
            self.flag("private", base, name)
        elif name == "super" and not self._local(name):
            self.flag("builtin", base, "super used outside a method call")
        elif self.kernel is not None and self.resolve(base) is None:
            self._kernel_read(base)

    def _self_like(self, base: ast.AST) -> bool:
        scope = next((s for s in reversed(self.scopes) if s.kind == "function"), None)
        return (isinstance(base, ast.Name) and scope is not None
                and scope.self_name == base.id)

    def _keeps_self(self, decorator: ast.expr) -> bool:
        """Does a method with this decorator still get its own object as first argument?
        A property, classmethod, cache or marker does; staticmethod, singledispatchmethod
        or a decorator of the submission's own may hand it anything, and the method then
        gets no access to underscore attributes of its first argument."""
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id in ("classmethod", "property"):
            return not (self._module_name(target.id) or self._local(target.id))
        if isinstance(target, ast.Attribute) and target.attr in ("setter", "getter",
                                                                 "deleter"):
            return not isinstance(decorator, ast.Call)
        ref = self.resolve(target)
        return ref is not None and ref.dotted() in SELF_KEEPING

    def _super_call(self, base: ast.AST) -> bool:
        return (isinstance(base, ast.Call) and isinstance(base.func, ast.Name)
                and base.func.id == "super" and self._in_method())

    def _check_super(self, node: ast.Call) -> None:
        """super() in a method only: bare, or as super(ItsClass, self), the old spelling.
        Other arguments reach past any class's override, not only the method's own class:
        super(type(req), req).Free() was MPI's Free of a request the ring watches."""
        if not self._in_method():
            self.flag("builtin", node, "super() outside a method")
            return
        if not node.args and not node.keywords:
            return
        at = max(i for i, s in enumerate(self.scopes) if s.kind == "function")
        method, owner = self.scopes[at], self.scopes[at - 1]
        names = [a.id if isinstance(a, ast.Name) else None for a in node.args]
        if node.keywords or method.self_name is None or names != [owner.name, method.self_name]:
            self.flag("builtin", node, "super() with arguments other than (its class, self)")

    def _in_method(self) -> bool:
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                return scope.method
        return False

    def _attribute_rule(self, node: ast.Attribute) -> str | None:
        attr, base = node.attr, node.value
        ref = self.resolve(base)
        if ref is REFUSED:
            return None  # the import was reported
        if mpi_class(ref) and not self.annotation:  # Intracomm.f2py of `from ... import`
            return "mpi-comm"
        sibling_module = ref is not None and ref.is_module and ref.module.startswith(
            "sibling:")
        if attr.startswith("_"):
            dunder = attr.startswith("__") and attr.endswith("__")
            if attr in NAME_DUNDERS and isinstance(node.ctx, ast.Load):
                return None  # a string: f"{type(self).__name__}(...)" in a __repr__
            if attr in NAMEDTUPLE_API and not (ref is not None and ref.is_module):
                return None  # a namedtuple's public methods (point._replace(x=1))
            if self._self_like(base) or self._super_call(base):
                return "private" if dunder and attr not in SAFE_DUNDERS else None
            if not dunder and attr in self._own_class_names(base):
                return None  # Workspace._cache: a class attribute of the submission's own
            if sibling_module and not dunder:
                return None
            return "private"
        if attr in INTERNALS:
            return "private"
        if (attr in ATTR_BUILTINS or attr in HELPER_GETATTR) and not (
                attr in OWN_METHOD_NAMES and ref is None and self._own_member(base, attr)):
            return "builtin"
        full = self.c._extend(ref, attr) if ref is not None else None
        if ref is not None and ref.is_module and not sibling_module:
            rule = self._module_attr(ref, attr, node)
            if rule is not None:
                return rule
        elif self._self_like(base):
            pass  # the class's own attributes: what was stored there was checked
        elif attr in MEMORY_ATTRS or attr == "ctypes":
            return "memory"
        elif attr in CONTEXT_ATTRS:
            return "numba"
        elif attr in DANGER_MODULES and not (full is not None and full.is_module):
            return "import"
        elif self.gemm_or_net:
            # On an object: only an array's product method (A.dot(B)); a field or function
            # of the submission's own may be called `inner` or `dot` (helpers.dot).
            if attr in ARRAY_PRODUCTS and not sibling_module:
                return "product"
            if self.kernel is None and attr in REDUCTIONS and not (
                    ref is not None and ref.module.startswith("numba.cuda")):
                return "array-library"
            if attr in HOST_COPIES:
                return "host-copy"
        if attr in COUNTING and self.part == "mpi" and not self._self_like(base):
            return "mpi-tally"
        if attr == "Abort" and self.part == "mpi" and not (ref is not None and ref.is_module):
            return "mpi-abort"  # a note: at run time it only ends the submission's own job
        if (attr in COMM_DENY or attr.startswith(("Create", "Split", "Spawn", "Dup", "Idup"))) \
                and attr not in DATATYPE_CTORS:
            if not (ref is not None and ref.is_module) and not self._self_like(base):
                return "mpi-comm"
        in_ring = self.ring == "all" or (isinstance(self.ring, set) and self.top in self.ring)
        if in_ring and is_collective(attr) and (ref is None or ref.module == "mpi4py.MPI") \
                and not (ref is None and self._own_member(base, attr)):
            return "mpi-collective"
        if in_ring and attr == "Free" and ref is not None and ref.module == "mpi4py.MPI" and (
                ref.rest[:1] in (("Request",), ("Prequest",))):
            return "mpi-request"  # MPI.Request.Free(req): past the ring's Free, unbound
        if self._kernel_name(base) and attr != "forall":
            return "launch"
        if full == Ref("numba.cuda", ("jit",)) and not self.decorator:
            return "jit"
        if self.kernel is not None:
            if full is not None:
                if not _kernel_path(full) and not self.c.is_constant_ref(full) and not (
                        self.c.is_kernel_ref(full)):
                    return "kernel-attribute"
            elif attr not in KERNEL_VALUE_ATTRS:
                return "kernel-attribute"
        return None

    @functools.cached_property
    def _own_members(self) -> frozenset[str]:
        """Names the classes of the submission's modules define (methods, fields, enum
        members): a ring class's `reduce_scatter` phase is the submission's own method
        (what the ring's communicator is asked at run time it refuses itself:
        nnkit.collectives), and so is a network class's `eval`."""
        trees = [self.info.tree, *(m.tree for m in self.c.modules.values())]
        return frozenset(name for tree in trees for node in ast.walk(tree)
                         if isinstance(node, ast.ClassDef) for name in body_names(node))

    def _own_class_names(self, base: ast.AST) -> frozenset[str]:
        """What the body of a class of the submission's own defines, when `base` names
        that class (module-level, plain: patterns.py); else nothing."""
        if not isinstance(base, ast.Name | ast.Attribute) or (
                isinstance(base, ast.Name) and self._local(base.id)):
            return frozenset()
        return defined_names(self.c, self.info, base)

    def _own_member(self, base: ast.AST, attr: str) -> bool:
        """Is `base.attr` a member of the submission's own object: `self`, one of its
        classes by name, or a local only ever assigned one of its classes' instances
        (`ring = Ring(comm)`), with `attr` a name its classes define?"""
        if self._self_like(base):
            return True
        if attr not in self._own_members:
            return False
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name):
            return self._own_class_name(base.func.id)  # Net(weights).eval(X)
        if isinstance(base, ast.Name) and not self._local(base.id):
            return self._own_class_name(base.id)
        scope = next((s for s in reversed(self.scopes) if s.kind == "function"), None)
        return isinstance(base, ast.Name) and scope is not None and base.id in scope.instances

    def _own_class_name(self, name: str) -> bool:
        """Does `name`, unshadowed, stand for a class of the submission's own modules
        (defined here, or imported from a sibling)?"""
        if self._local(name) or any(bound == name for bound, _ in self.info.rebinds):
            return False
        if name in self.info.classes:
            return True
        ref = self.info.aliases.get(name)
        found = self.c._sibling_def(self.c._deref(ref)) if ref is not None else None
        return found is not None and found[1] in found[0].classes

    def _module_attr(self, ref: Ref, attr: str, node: ast.AST) -> str | None:
        """The rule `module.attr` breaks, if any (ref: a module)."""
        module = ref.module
        if attr.startswith("_"):
            return "private"
        if attr in ATTR_BUILTINS or attr in HELPER_GETATTR:
            return "builtin"
        if module == "mpi4py.MPI" and attr in MPI_MEMORY:
            return "memory"
        if attr in MEMORY_ATTRS or attr == "ctypes":
            return "memory"
        if attr in DANGER_MODULES and SUBMODULES.get(module, {}).get(attr) is None:
            return "import"
        if module == "numpy":
            if attr in NUMPY_SUBMODULES:
                return None
            if self.gemm_or_net and attr in PRODUCTS:
                return "product"
            if attr in NUMPY_DENY or attr in MEMORY_ATTRS:
                return "memory" if attr not in ("random", "testing", "ma", "char", "rec",
                                                "strings", "version", "info", "show_config",
                                                "show_runtime", "get_include") else "import"
            if self.gemm_or_net and self.kernel is None and attr not in NP_HOST_OK:
                if attr == "newaxis":
                    return "array-library"
                return ("host-copy" if attr in ("asanyarray", "copy", "require",
                                                "asfortranarray", "fromiter")
                        else "array-library")
            if attr in ("linalg", "fft", "polynomial", "emath"):
                return "import" if not self.gemm_or_net else "product"
            return None
        if module in ("numpy.typing", "numpy.dtypes", "numpy.exceptions"):
            return None
        if module in ("math", "cmath"):
            return None
        if module == "numba":
            if attr in ("cuda", "types") or attr in NUMBA_TYPES:
                return None
            return "numba"
        if module == "numba.types":
            return "numba" if attr in NUMBA_TYPES_MODULES else None
        if module == "numba.cuda":
            if attr in CUDA_SUBMODULES or attr in CUDA_HOST or attr in NUMBA_TYPES:
                return None
            if attr in CUDA_KERNEL or attr in CUDA_KERNEL_CALLS:
                return None
            if _vector_type(attr):
                return None
            return "numba"
        if module == "numba.cuda.random":
            return None if attr.startswith(("xoroshiro128p_", "create_xoroshiro128p_",
                                            "init_xoroshiro128p_")) else "numba"
        if module == "numba.cuda.libdevice":
            return "numba" if attr in DANGER_MODULES or attr in HELPER_MODULE_ATTRS else None
        if module == "nnkit":
            return None if attr == "backend" else "import"
        if module == "nnkit.backend":
            if attr in BACKEND_BY_PART[self.part]:
                return None
            return "host-copy" if attr == "to_host" else "backend"
        if module == "mpi4py":
            return None if attr == "MPI" and self.part == "mpi" else "import"
        if module == "mpi4py.MPI":
            if attr in MPI_MEMORY:
                return "memory"
            if attr in MPI_DENY:
                return "mpi-comm"
            if attr in MPI_CLASSES:  # imported for annotations: its uses are judged
                return None if self.annotation or isinstance(node, ast.ImportFrom) else (
                    "mpi-comm")
            return None
        if module == "copy":  # deepcopy's memo maps id()s to objects: one argument only
            if attr == "copy" or (attr == "deepcopy" and not isinstance(node, ast.Attribute)):
                return None
            return "builtin"
        if module in HELPERS:
            if attr in HELPERS[module]:
                return "builtin" if attr in HELPER_GETATTR else "import"
            if (attr in DANGER_MODULES or attr in HELPER_MODULE_ATTRS) and SUBMODULES.get(
                    module, {}).get(attr) is None:
                return "import"
            return None
        return "import"
