"""Names built at run time, and the builtins that turn them into objects."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np

product = getattr(np, "ein" + "sum")  # expect: builtin, module-value
ctypes = __import__("ctypes")  # expect: builtin
value = eval("1 + 1")  # expect: builtin
namespace = vars(np)  # expect: builtin, module-value
everything = globals()  # expect: builtin
exec("import os")  # expect: builtin
fetch = getattr  # expect: builtin
code = compile("1", "<x>", "eval")  # expect: builtin
builtins_dict = __builtins__  # expect: private
spec = __spec__  # expect: private
numpy_again = np  # expect: module-value


def gemm_naive(A, B, C, alpha, beta):
    setattr(C, "x", 1)  # expect: builtin
    raise SystemExit(0)  # expect: builtin


# types builds bags of data (SimpleNamespace, allowed) and functions and code (refused).
import types  # noqa: E402
from types import SimpleNamespace  # noqa: E402

layers = SimpleNamespace(hidden=8)
maker = types.FunctionType  # expect: builtin
from types import CodeType  # noqa: E402  # expect: builtin

# Red team, round four: raw memory through an array interface given as a keyword or a
# dict key, and an address read through a format field.
raw = np.asarray(SimpleNamespace(__array_interface__={"shape": (1,)}))  # expect: private, host-copy
spec = {"__array_interface__": None}  # expect: private
address = "{0.__array_interface__[data][0]}".format(raw)  # expect: private
import pydoc  # noqa: E402  # expect: import
from string import Formatter  # noqa: E402  # expect: import
