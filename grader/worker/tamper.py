"""Has the submission rewritten the kit or a library it runs next to?

Assigning to a module's global (`nnkit.timing._clock = fake`, `numpy.allclose = ...`) is
not an audited operation, so the guard cannot refuse it. Instead, the worker photographs
the namespaces of the modules it trusts before the submission is imported, and compares
them before it writes any result: a value replaced or removed there is tampering, and the
job's results are not written. Values the libraries add later (lazily loaded submodules,
caches) are new names, not changes, and are ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

# Modules (and their submodules) whose globals the kit relies on while grading.
WATCHED = ("nnkit", "grader", "numpy", "numba.cuda", "cupy", "mpi4py", "json", "os",
           "time", "builtins", "io", "math", "threading", "functools", "operator")
# Globals that their own modules rebind as they run (not the submission's doing).
MUTABLE: frozenset[tuple[str, str]] = frozenset()


class Tampered(RuntimeError):
    """The submission changed a module the kit trusts."""


class Snapshot:
    """Every global of the watched modules, at one moment."""

    def __init__(self, prefixes: Iterable[str] = WATCHED):
        self.prefixes = tuple(prefixes)
        self.values = self._take()

    def _watched(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self.prefixes)

    def _take(self) -> dict[str, tuple[object, dict[str, object]]]:
        found = {}
        for name, module in list(sys.modules.items()):
            if module is None or not self._watched(name):
                continue
            try:
                space = dict(vars(module))
            except TypeError:
                continue
            found[name] = (module, space)  # the values themselves: ids could be reused
        return found

    def changes(self, limit: int = 5) -> list[str]:
        """'module.name' of globals replaced or removed since the snapshot (and modules
        replaced in sys.modules)."""
        changed = []
        for name, (module, before) in self.values.items():
            if sys.modules.get(name, module) is not module:
                changed.append(f"sys.modules[{name!r}]")
                continue
            space = vars(module)
            for key, value in before.items():
                if (name, key) in MUTABLE:
                    continue
                if space.get(key, _MISSING) is not value:
                    changed.append(f"{name}.{key}")
                    if len(changed) >= limit:
                        return changed
        return changed

    def check(self) -> None:
        found = self.changes()
        if found:
            raise Tampered("the submission changed the kit or a library it runs next to: "
                           + ", ".join(found))


_MISSING = object()
