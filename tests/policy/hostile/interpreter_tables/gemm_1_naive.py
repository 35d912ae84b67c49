"""The interpreter's tables through sys, whose other uses the checker leaves to the audit
hook: every loaded module (ctypes, weakref) without an import, and the import and
exception hooks. Printing to sys.stderr stays a note on the import only."""

# ruff: noqa (hostile code, written to be refused)

import sys  # expect: import
import sys as interp  # expect: import
from sys import modules  # expect: import, private

memory = sys.modules["ctypes"]  # expect: private
interp.meta_path.insert(0, None)  # expect: private
hook = sys.excepthook  # expect: private


def gemm_naive(A, B, C, alpha, beta):
    print("launching", file=sys.stderr)
    finalizers = interp.modules["weakref"]  # expect: private
    # Red team: the recorder's copies raise a reference count, which told checked calls.
    checked = sys.getrefcount(A) > 3  # expect: private
    caller = interp._getframe(1)  # expect: private
