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

# The kit's own packages, every module of them, and the library modules whose globals
# the kit calls through while it records, replays, copies and saves results (the
# libraries' other modules keep caches in their globals and rebind them as they run).
WATCHED = ("nnkit", "grader")
WATCHED_EXACT = ("numpy", "numpy.lib._npyio_impl", "json", "os", "time", "builtins", "io",
                 "math", "threading", "functools", "operator", "zipfile", "cupy", "cupy.cuda",
                 "numba.cuda.dispatcher", "numba.cuda.simulator.kernel",
                 "numba.cuda.simulator.cudadrv.devicearray", "mpi4py", "mpi4py.MPI")
# (numba's top-level modules rebind names such as numba.types while they compile.)
# Globals that their own modules rebind as they run (not the submission's doing).
MUTABLE: frozenset[tuple[str, str]] = frozenset()


# Objects of the kit whose attributes are watched too, and their classes' (the launch
# recorder: the submission can reach it through what the kit hands its kernels, and
# replacing one of its methods would forge a replay). Registered before the snapshot.
_OBJECTS: list[tuple[object, frozenset[str], frozenset[str] | None]] = []


def watch(obj: object, state: Iterable[str] = (), only: Iterable[str] | None = None) -> None:
    """Watch obj's attributes (`only` these, if given) but `state` (those it changes
    itself as it runs), and its class's (for a class, its own only), in every Snapshot
    taken from now on."""
    _OBJECTS.append((obj, frozenset(state), None if only is None else frozenset(only)))


class Tampered(RuntimeError):
    """The submission changed a module the kit trusts."""


class Snapshot:
    """Every global of the watched modules, at one moment."""

    def __init__(self, prefixes: Iterable[str] = WATCHED, exact: Iterable[str] = WATCHED_EXACT):
        self.prefixes, self.exact = tuple(prefixes), frozenset(exact)
        self.values = self._take()
        self.objects = self._take_objects()

    def _watched(self, name: str) -> bool:
        return name in self.exact or any(name == p or name.startswith(p + ".")
                                         for p in self.prefixes)

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

    @staticmethod
    def _take_objects() -> list[tuple[str, object, dict[str, object], frozenset[str]]]:
        found, seen = [], set()
        for obj, state, only in _OBJECTS:
            for item in (obj,) if isinstance(obj, type) else (obj, type(obj)):
                if id(item) in seen:
                    continue
                seen.add(id(item))
                name = item.__qualname__ if isinstance(item, type) else type(item).__qualname__
                space = dict(vars(item))
                if item is obj and only is not None:
                    space = {k: v for k, v in space.items() if k in only}
                found.append((name, item, space, state if item is obj else frozenset()))
        return found

    def changes(self, limit: int = 5) -> list[str]:
        """'module.name' of globals replaced or removed since the snapshot (and modules
        replaced in sys.modules), then 'Class.name' of watched objects' attributes."""
        changed = []
        for name, item, before, state in self.objects:
            space = vars(item)
            if not isinstance(item, type):  # (a library's class may gain caches)
                changed += [f"{name}.{key}" for key in space if key not in before]
            changed += [f"{name}.{key}" for key, value in before.items()
                        if key not in state and space.get(key, _MISSING) is not value]
            if len(changed) >= limit:
                return changed[:limit]
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
