"""A submission's methods work on its own objects only.

The source policy lets a method use underscore attributes of `self` (its own state), and
trusts the name: a method called through its class is handed whatever the caller passes
as `self` (`Peek.observer(nnkit.backend)` reads `backend._copy_observer`; red team, round
eight). Who holds the class cannot be told from the source (an alias, `type(obj)`, a
class decorator, `cls` in a classmethod all hand it out), so this is checked where the
call happens: every class the submission defines is built through `builtins.__build_class__`,
which `install` wraps, and the functions of its body are replaced by ones that first look
at their first argument (also those under a property, functools' caches and
cached_property, the decorators after which the policy lets a method use `self._x`). It
must be an object of one of the submission's classes, or plain data (a number, a string,
a container, a NumPy array: a helper written without @staticmethod and called through its
class, `Util.grid(n)`); a module, a kit object or anything else of a library is refused
with a TypeError. Only methods that do what the policy allows on `self` alone (store an
attribute, read an underscore or tally attribute) are checked: any other may take any
first argument (`Launch.grid_for(C)` with a device array).
"""

from __future__ import annotations

import builtins
import dis
import functools
import os
import sys
import types
from typing import Any

import numpy as np

# First arguments a method called through its class may get besides the submission's own
# objects: plain data, whose attributes hold no one's state. Exact types: a subclass (the
# simulator's shared-memory arrays are NumPy arrays) may carry state of the kit's.
PLAIN_DATA = frozenset({int, float, complex, bool, str, bytes, tuple, list, dict, set,
                        frozenset, type(None), np.ndarray})
# The attribute names the policy lets a method use on `self` only (besides underscores):
# the kit's tallies (grader/checks/policy/names.py, COUNTING).
TALLIES = frozenset({"calls", "bytes_sent"})
# Functions of a class body that Python makes static or class methods itself.
IMPLICIT = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


def uses_self_trust(code: types.CodeType) -> bool:
    """Does this function (or one nested in it) store or delete an attribute, or read an
    underscore or tally attribute: what the policy allows on `self` alone? A method that
    does neither can do nothing to a foreign first argument that any function could not,
    and is left as it is (a helper in a class without @staticmethod, `Launch.grid(C)`)."""
    for instruction in dis.get_instructions(code):
        name = instruction.argval
        if instruction.opname in ("STORE_ATTR", "DELETE_ATTR"):
            return True
        if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR") and (
                isinstance(name, str) and (name.startswith("_") and not name.endswith("__")
                                           or name in TALLIES)):
            return True
    return any(uses_self_trust(c) for c in code.co_consts if isinstance(c, types.CodeType))


def install(submission: Any) -> None:
    """Seal every class built from now on in a module of the submission's folder."""
    folder = os.path.realpath(str(submission)) + os.sep
    build_class = builtins.__build_class__
    known: dict[str, bool] = {}  # module name -> in the folder (a module keeps its file)

    def mine(module_name: Any) -> bool:
        if not isinstance(module_name, str):
            return False
        if module_name not in known:
            where = getattr(sys.modules.get(module_name), "__file__", None)
            if not isinstance(where, str):
                return False
            known[module_name] = os.path.realpath(where).startswith(folder)
        return known[module_name]

    def check(fn: Any) -> Any:
        if not uses_self_trust(fn.__code__):
            return fn

        @functools.wraps(fn)
        def method(*args: Any, **kwargs: Any) -> Any:
            kind = type(args[0]) if args else None
            if args and not (kind in PLAIN_DATA or isinstance(args[0], np.generic)
                             or mine(getattr(kind, "__module__", None))):
                raise TypeError(
                    f"{fn.__qualname__} was called with {type(args[0]).__name__!r} as its "
                    "first argument (self): a method of your class works on your own "
                    "objects or plain data, not on the kit's or a library's")
            return fn(*args, **kwargs)

        return method

    def sealed(func: Any, name: Any, *bases: Any, **kwargs: Any) -> Any:
        cls = build_class(func, name, *bases, **kwargs)
        if isinstance(cls, type) and mine(getattr(cls, "__module__", None)):
            for key, value in list(vars(cls).items()):
                if isinstance(value, types.FunctionType) and key not in IMPLICIT:
                    value = check(value)
                elif isinstance(value, functools.cached_property):
                    value.func = check(value.func)
                    continue
                elif callable(getattr(value, "cache_parameters", None)) and isinstance(
                        getattr(value, "__wrapped__", None), types.FunctionType):
                    # functools.lru_cache or cache on a method: a new cache, around the check
                    value = functools.lru_cache(**value.cache_parameters())(
                        check(value.__wrapped__))
                elif isinstance(value, property):
                    value = property(*(check(f) if f is not None else None
                                       for f in (value.fget, value.fset, value.fdel)),
                                     value.__doc__)
                else:
                    continue
                try:
                    setattr(cls, key, value)
                except (AttributeError, TypeError):
                    pass  # a class that refuses (an enum's members): it stays as it was
        return cls

    builtins.__build_class__ = sealed
