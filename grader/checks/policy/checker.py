"""The checker: loads a submission's modules and checks each of them with the visitor.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from grader.checks.policy.interpreter import reaches as interpreter_reaches
from grader.checks.policy.names import KNOWN_PACKAGES, REFUSED, Ref
from grader.checks.policy.resolve import _Resolver
from grader.checks.policy.rules import RING_MODULE, Violation
from grader.checks.policy.source import (
    _installed,
    _listing,
    _Module,
    _module_scope,
    _named_binding,
    _read,
    _sibling_problem,
    _stores,
)
from grader.checks.policy.visitor import _Visitor

# ---------------------------------------------------------------------------------------
# The checker


class _Checker(_Resolver):
    """Resolves names across the submission's modules and checks each of them."""

    def __init__(self, folder: Path, part: str):
        self.folder, self.part = folder, part
        self.kinds = _listing(folder)
        self.modules: dict[str, _Module] = {}
        self.violations: list[Violation] = []

    # loading -----------------------------------------------------------------------------

    def load(self, module: str) -> None:
        todo, seen = [module], set()
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            path = self.folder / f"{name}.py"
            source, problem = _read(path)
            if problem:
                self.violations.append(Violation("file", path.name, 0, problem))
                continue
            if source is None:
                continue
            try:
                tree = ast.parse(source, filename=path.name)
            except (SyntaxError, ValueError, UnicodeError, LookupError):
                continue  # the worker reports it (a bad coding cookie included)
            except (RecursionError, MemoryError):
                self.violations.append(Violation("file", path.name, 0,
                                                 "nested too deeply to be checked"))
                continue
            info = _Module(name, path.name, tree)
            self.modules[name] = info
            try:
                self._collect(info)
            except (RecursionError, MemoryError):
                del self.modules[name]
                self.violations.append(Violation("file", path.name, 0,
                                                 "nested too deeply to be checked"))
                continue
            todo.extend(s for s in info.siblings if _sibling_problem(s, self.kinds) is None)

    def _is_sibling(self, name: str, relative: bool) -> bool:
        if relative:
            return f"{name}.py" in self.kinds or name in self.kinds
        # `import X` finds an installed X before the submission's X.py (the folder is last
        # on the worker's path): a sibling only if nothing else answers to the name.
        return (f"{name}.py" in self.kinds and name not in sys.stdlib_module_names
                and name not in KNOWN_PACKAGES and not _installed(name))

    def _collect(self, info: _Module) -> None:
        """Aliases, definitions, kernels, constants, siblings and rebinds of a module."""
        events: list[tuple[str, str, ast.AST, Ref | None]] = []  # (name, kind, node, ref)
        for stmt in _module_scope(info.tree.body):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    ref = self._import_ref(alias.name)
                    if alias.asname is None and ref is not REFUSED:
                        top = alias.name.split(".")[0]
                        ref = (Ref(f"sibling:{top}") if ref.module.startswith("sibling:")
                               else Ref(top))
                    bound = alias.asname or alias.name.split(".")[0]
                    events.append((bound, "import", stmt, ref))
            elif isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if alias.name == "*":
                        continue
                    events.append((alias.asname or alias.name, "import", stmt,
                                   self._from_ref(stmt, alias.name)))
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                events.append((stmt.name, "def", stmt, None))
            elif isinstance(stmt, ast.ClassDef):
                events.append((stmt.name, "class", stmt, None))
            else:
                targets: list[ast.AST] = []
                if isinstance(stmt, ast.Assign):
                    targets = stmt.targets
                elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                    targets = [stmt.target]
                value = stmt.value if targets else None
                for target in targets:
                    if isinstance(target, ast.Name) and len(targets) == 1:
                        events.append((target.id, "assign", value, None))
                    elif (len(targets) == 1 and isinstance(target, ast.Tuple)
                          and isinstance(value, ast.Tuple)
                          and len(target.elts) == len(value.elts)
                          and all(isinstance(e, ast.Name) for e in target.elts)):
                        events.extend((e.id, "assign", v, None)  # A, B = 16, 4
                                      for e, v in zip(target.elts, value.elts, strict=True))
                    else:
                        events.extend((n.id, "other", stmt, None) for n in _stores(target))
                if not targets and not isinstance(stmt, ast.If | ast.For | ast.While
                                                  | ast.Try | ast.With | ast.Match):
                    events.extend((n.id, "other", stmt, None) for n in _stores(stmt))
                elif isinstance(stmt, ast.For | ast.With | ast.AsyncFor | ast.AsyncWith):
                    header = (stmt.target,) if isinstance(stmt, ast.For | ast.AsyncFor) \
                        else tuple(i.optional_vars for i in stmt.items if i.optional_vars)
                    for target in header:
                        events.extend((n.id, "other", stmt, None) for n in _stores(target))
                elif isinstance(stmt, ast.Try):
                    events.extend((h.name, "other", h, None) for h in stmt.handlers if h.name)
        # walrus targets and match captures of module-level code (tests, patterns,
        # comprehensions) bind module names too: `case Plan:` rebinds the class Plan
        events.extend((name, "other", node, None)
                      for name, node in _pattern_and_walrus_bindings(info.tree.body))
        # names declared global (and stored) in functions are rebound at module level
        nodes = list(ast.walk(info.tree))
        has_global = any(isinstance(node, ast.Global) for node in nodes)
        for node in nodes if has_global else ():
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                declared = {n for s in ast.walk(node) if isinstance(s, ast.Global)
                            for n in s.names}
                for name in declared:
                    for stored in ast.walk(node):
                        if (isinstance(stored, ast.Name) and stored.id == name
                                and isinstance(stored.ctx, ast.Store | ast.Del)) or (
                                    name in _named_binding(stored)):
                            events.append((name, "other", stored, None))
                            break
        first: dict[str, tuple[str, Ref | None]] = {}
        counts: dict[str, int] = {}
        for name, kind, node, ref in events:
            info.bound.add(name)
            counts[name] = counts.get(name, 0) + 1
            if name not in first:
                first[name] = (kind, ref)
                if kind == "import":
                    info.aliases[name] = ref
                elif kind == "def":
                    info.functions[name] = node
                elif kind == "class":
                    info.classes.add(name)
                elif kind == "assign":
                    info.assigned[name] = node
                continue
            kind0, ref0 = first[name]
            same_import = kind == kind0 == "import" and (ref == ref0 or REFUSED in (ref, ref0))
            if not same_import and "import" in (kind0, kind) or "def" in (kind0, kind) or (
                    "class" in (kind0, kind)):
                info.rebinds.append((name, node))
        for name in list(info.assigned):
            if counts.get(name, 0) != 1:
                del info.assigned[name]
        # siblings: every import of one, anywhere in the module (functions included)
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    ref = self._import_ref(alias.name)
                    if ref.module.startswith("sibling:"):
                        info.siblings.append(ref.module.split(":", 1)[1])
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    ref = self._from_ref(node, alias.name)
                    if ref.module.startswith("sibling:"):
                        info.siblings.append(ref.module.split(":", 1)[1])

    def _finish(self) -> None:
        """Kernels and constants of every module, once all are loaded (a kernel's cuda or a
        constant may come from a sibling)."""
        for info in self.modules.values():
            for name, node in info.functions.items():
                if isinstance(node, ast.FunctionDef) and any(
                        self._is_jit(d, info.aliases) for d in node.decorator_list):
                    info.kernels.add(name)
        changed = True
        while changed:  # constants: one module-level assignment of a constant expression
            changed = False
            for info in self.modules.values():
                for name, value in info.assigned.items():
                    if name not in info.constants and self._constant(value, info):
                        info.constants.add(name)
                        changed = True
    # checking ----------------------------------------------------------------------------

    def check_all(self, module: str) -> None:
        try:
            self._finish()
        except (RecursionError, MemoryError):
            self.violations.append(Violation("file", f"{module}.py", 0,
                                             "nested too deeply to be checked"))
            return
        ring = self._ring_scope(module) if self.part == "mpi" and module == RING_MODULE \
            else {}
        for name, info in self.modules.items():
            visitor = _Visitor(self, info, ring.get(name))
            try:
                visitor.run()
            except (RecursionError, MemoryError):
                self.violations.append(Violation("file", info.file, 0,
                                                 "nested too deeply to be checked"))
                continue
            except Exception as err:  # noqa: BLE001 - a gap in this checker: fail closed
                self.violations.append(Violation(
                    "file", info.file, 0, f"could not be checked ({type(err).__name__}: "
                    f"{str(err)[:80]}); please tell the course staff"))
                continue
            self.violations.extend(visitor.found)
            self.violations.extend(interpreter_reaches(info.tree, info.file))
            for name2, node in info.rebinds:
                self.violations.append(Violation("rebind", info.file,
                                                 getattr(node, "lineno", 0), name2))

    def _ring_scope(self, module: str) -> dict[str, object]:
        """Per module: "all" (the ring module, or a module whose bindings it takes that are
        not defs) or the set of its top-level defs and classes the ring's code uses."""
        scope: dict[str, object] = {module: "all"}
        todo: list[tuple[str, str]] = []

        def uses(info: _Module, nodes) -> None:
            for node in nodes:
                for sub in ast.walk(node):
                    ref = None
                    if isinstance(sub, ast.Name):
                        if sub.id in info.functions or sub.id in info.classes:
                            todo.append((info.name, sub.id))
                            continue
                        ref = info.aliases.get(sub.id)
                    elif isinstance(sub, ast.Attribute):
                        ref = self._resolve_static(sub, info.aliases)
                    if ref is not None:
                        found = self._sibling_def(self._deref(ref))
                        if found is not None:
                            todo.append((found[0].name, found[1]))

        ring = self.modules.get(module)
        if ring is None:
            return scope
        uses(ring, [ring.tree])
        while todo:
            name, attr = todo.pop()
            info = self.modules.get(name)
            if info is None or scope.get(name) == "all":
                continue
            chosen = scope.setdefault(name, set())
            if attr in chosen:
                continue
            if attr in info.functions:
                chosen.add(attr)
                uses(info, [info.functions[attr]])
            elif attr in info.classes:
                chosen.add(attr)
                uses(info, [n for n in info.tree.body
                            if isinstance(n, ast.ClassDef) and n.name == attr])
            elif attr in info.constants:  # a constant (DTYPE = np.float32): no code
                chosen.add(attr)
            elif attr not in info.aliases:
                scope[name] = "all"  # a module-level value: assume any of its code
        return scope


def _pattern_and_walrus_bindings(body: list[ast.stmt]):
    """(name, node) of what module-level code binds by a walrus (anywhere, comprehensions
    included: they bind the enclosing scope), a match pattern or an except clause; not
    entering functions, classes or lambdas."""
    todo: list[ast.AST] = list(body)
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            todo.extend(cur.decorator_list)  # run at module level
            continue
        if isinstance(cur, ast.Lambda):
            continue
        if isinstance(cur, ast.NamedExpr) and isinstance(cur.target, ast.Name):
            yield cur.target.id, cur
        for name in _named_binding(cur):
            yield name, cur
        todo.extend(ast.iter_child_nodes(cur))
