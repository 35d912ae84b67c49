"""What a graded module may contain: a static policy, checked on the source in the grader.

`check(folder, module, part)` reads `module`.py of a submission folder and the sibling
modules it imports (relative or absolute, transitively), parses them exactly as Python
would (bytes in, so a coding cookie means the same to both), and returns the places that
break a rule, each as a `Violation` with its file, line, the code and the rule. The grader
never runs submitted code here; a module that does not parse yields nothing (the worker
reports its SyntaxError). Code under a module-level `if __name__ == "__main__":` is not
run by the grader and is not checked (its `else:` is; `__name__` may not be rebound).

The rules, in short (RULES below has the sentence each violation carries):

- file: graded modules are regular files of at most 1 MiB; a sibling a module imports
  must not be shadowed by what Python would load first (a package folder, an extension
  module or a .pyc of the same name), nor be a link.
- import, star-import: an allow-list of modules (numpy, math, cmath, numba's cuda and
  types, nnkit.backend, mpi4py.MPI in Part 3, a few harmless stdlib helpers, the
  submission's own modules); never `import *`.
- builtin: eval, exec, compile, __import__, getattr, setattr, delattr, vars, globals,
  locals, open, input, breakpoint, help, memoryview, id, exit/quit, SystemExit,
  KeyboardInterrupt, operator.attrgetter/methodcaller, typing.get_type_hints, type()
  with three arguments, super() outside a method; also when used as values.
- private: attributes starting with `_` and interpreter internals (cell_contents, frames,
  code objects, mro), except `_x` and ordinary special methods on self/cls/super() in
  the submission's own classes; bare dunder names other than __name__, __file__, __doc__;
  binding a dunder name (`__name__ = "__main__"` would run the unchecked main block);
  defining protocol hooks (__array__, __cuda_array_interface__, __reduce__, __getattr__).
- product, array-library, host-copy (Parts 1 and 2): no library matrix products (the
  anticheat's list, @, outer, kron, np.matrix, linalg, ...), numpy only for scalars,
  dtypes and host-side setup, no reductions or broadcasting on operands, no copies of
  operands to the host.
- memory: no raw memory, files or pickles (ctypes, as_strided, np.lib, frombuffer, memmap,
  load/save, tofile, MPI.memory/buffer/pickle, np.ndarray over a buffer).
- numba, backend: of numba only CUDA kernels, device arrays, events and types (no
  streams, contexts, driver, simulator); of nnkit.backend only the names the handouts give
  students.
- module-assign, module-value, rebind: imported modules, their objects and the arguments a
  function is given are read-only (no attribute stores: `comm.bytes_sent = 0`,
  `np.savez = f`), modules are used only as `module.name`; names bound by import, def or
  class are bound once.
- decorator, jit, launch: kernels are module-level functions with exactly one decorator,
  `@cuda.jit` or `@cuda.jit(...)`; cuda.jit is used nowhere else; only the submission's own
  kernels are launched, and a kernel object is not otherwise touched.
- kernel-*: a kernel body is code numba compiles for the GPU (in the simulator a kernel is
  plain Python that could compute anything on the host): CUDA intrinsics, math, numpy
  scalar types and elementwise math, a few builtins and the submission's own kernels;
  no slices, no arithmetic on whole arrays or rows, no host objects, and only constants
  from module level.
- mpi-comm, mpi-collective (Part 3): only the communicator given, as given (no
  COMM_WORLD, Dup, Split, Create*, handles, the counting communicator's tallies); in
  mpi_2_ring.py and whatever it uses from other modules, point-to-point calls only.

What this layer cannot stop, and what covers it at run time:

- Array code that is neither a library product nor a named reduction: a launcher can
  compute on device arrays with plain operators (broadcast products summed with `+` in
  a Python loop over slices, or `sum()` over a reshaped product), or index them element
  by element on the host (slow, but correct). In the simulator a device array also turns
  into a host array unasked (`A * 1`, `np.float32(A)`), so the named host copies refused
  here are not the only way down. Types are invisible to the AST, so `A * B` of two
  arrays looks like `alpha * beta`. Launch counting (a launcher that launches no kernel)
  and replaying the recorded launches on fresh operands (a result that does not come
  from the kernels) cover it.
- The rank of an array: a kernel that only ever indexes a 2-D array with one index does
  row arithmetic that the simulator runs and a GPU would refuse to compile. Compiling each
  kernel for the GPU target with its launch types (numba.cuda.compile_ptx, which needs
  no GPU) covers it; on a GPU, numba does it anyway.
- Values, not names: the grader's objects reached through what a legitimate call returns
  (an exception's arguments, an object a library hands back) and attributes whose names
  are built at run time are out of reach only because every way of turning a string into
  an object is refused or unreachable (getattr, vars, __dict__, attrgetter, eval,
  string.Formatter.get_field); `str.format("{0.__class__}")` still reads attributes into
  a string, which gives text, not objects. Python-level escapes that need no name (a C
  extension bug, a crafted pickle sent between ranks) are left to the sandbox.
- Timings: nothing here stops a submission from being slow on purpose or fast by
  caching; the timed-call protocol (new operands per call, replay) covers that.
- Inputs recomputed instead of received: Part 3 code could rebuild other ranks' data from
  the grader's public seeds with its own copy of the generator (numpy.random and the
  grader's modules are refused, a hand-written PCG64 is not). The bytes the counting
  communicator saw (2 (p - 1) / p of the buffer for a ring) would show it.
- The folder as the worker sees it: this checks the files it is given. Run it on the
  private copy the worker imports from (after copy_submission), so that nothing changes
  in between; the copy drops __pycache__ but keeps .pyc and .so files, which are refused
  here only where they shadow a module that is imported.

Standard library only: this module runs in the grader and imports nothing of the worker.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

PARTS = ("gemm", "net", "mpi")
MAX_BYTES = 1 << 20  # a graded module larger than this is refused, not skipped
RING_MODULE = "mpi_2_ring"  # the module whose code must be point-to-point

RULES = {
    "file": "a graded module must be a regular Python file of at most 1 MiB, simple enough "
            "to check, and a sibling it imports must not be a link or be shadowed by a "
            "package, extension module or .pyc of the same name (Python would load that "
            "instead, unchecked)",
    "import": "graded modules may import only numpy, math, cmath, numba (cuda, types), "
              "nnkit.backend, mpi4py.MPI (Part 3), __future__, typing, dataclasses, "
              "functools, itertools, operator, collections, enum, abc, warnings, time and "
              "the submission's own modules",
    "star-import": "`from ... import *` hides what a module takes: import the names you use",
    "builtin": "eval, exec, compile, __import__, getattr, setattr, delattr, vars, globals, "
               "locals, open, input, breakpoint, help, memoryview, id, exit, quit, "
               "SystemExit, KeyboardInterrupt, attrgetter, methodcaller, get_type_hints, "
               "type() with 3 arguments and super() outside a method reach around the "
               "language; graded code has no use for them",
    "private": "underscore names and interpreter internals (__dict__, __class__, "
               "__globals__, __closure__, cell_contents, frames, code objects, mro) belong "
               "to other code; graded code may use underscore attributes only on self, "
               "cls or super() in its own classes",
    "product": "library matrix products (matmul, dot, einsum, tensordot, the @ operator, "
               "outer, kron, np.matrix, linalg, ...) are not allowed where the product must "
               "be your own kernel",
    "array-library": "in the GEMM and network modules numpy is for scalars, dtypes and small "
                     "host-side setup only: reductions, broadcasting and other array "
                     "computations on the operands belong in your kernels",
    "host-copy": "GEMM and network code keeps its arrays on the device: a copy of an operand "
                 "to the host (to_host, copy_to_host(), get(), tolist(), np.asarray of a "
                 "device array) is how a launcher computes on the CPU instead of in its "
                 "kernels",
    "memory": "raw memory, files and pickles (ctypes, as_strided, np.lib, frombuffer, "
              "memmap, load/save, tofile, np.ndarray over a buffer, MPI.memory, MPI.buffer, "
              "MPI.pickle) are not for graded code",
    "numba": "of numba, graded code may use CUDA kernels (@cuda.jit), device arrays, events "
             "and numba types; other compilers (njit, vectorize, cfunc, cuda.reduce), "
             "streams, the driver, contexts, the simulator, device management and numba's "
             "internals are not allowed",
    "backend": "of nnkit.backend, graded code may use cuda, to_device, empty, zeros, copy, "
               "copy_into and synchronize (and to_host in Part 3); xp, as_cupy and select "
               "hand out the array library or the backend itself",
    "module-assign": "graded code may not change imported modules, their objects, the "
                     "objects it is given (arguments) or its own functions and kernels by "
                     "assigning or deleting their attributes: that is how traps, checks, "
                     "clocks, tallies and kernels are replaced",
    "module-value": "an imported module may be used only as `module.name`: storing or "
                    "passing the module itself hides what is taken from it",
    "rebind": "a name bound by an import, def or class may not be bound again at module "
              "level (or through `global`): the grader would call or launch something "
              "other than what was checked",
    "decorator": "a kernel carries exactly one decorator, @cuda.jit or @cuda.jit(...); other "
                 "functions may use staticmethod, classmethod, property, the decorators of "
                 "functools, dataclasses, typing, abc and enum, or the submission's own "
                 "functions",
    "jit": "cuda.jit may only decorate a module-level function (@cuda.jit or "
           "@cuda.jit(...), without link= or extensions=): aliases, calls or conditional "
           "choices of it hide which functions are kernels",
    "launch": "only the submission's own @cuda.jit kernels are launched, as "
              "kernel[grid, block](...) (or kernel.forall(n)(...)); a kernel object is not "
              "used any other way",
    "kernel-syntax": "kernel bodies must be code numba compiles for the GPU (in the "
                     "simulator a kernel is plain Python): no nested functions, lambdas, "
                     "comprehensions, classes, imports, try, with, yield, global, nonlocal, "
                     "del, f-strings, *args, lists, dicts or sets",
    "kernel-call": "a kernel may call only CUDA intrinsics (cuda.grid, cuda.syncthreads, "
                   "cuda.shared.array, cuda.atomic.*, ...), math functions, numpy scalar "
                   "types and elementwise math, the builtins range, min, max, abs, int, "
                   "float, bool, len, round, complex, pow, divmod, print, and the "
                   "submission's own @cuda.jit functions",
    "kernel-slice": "no `:` slices or `...` in kernels: a slice is a whole-array view, and "
                    "whole-array work is what the simulator runs on the host but numba "
                    "cannot compile for the GPU; index element by element",
    "kernel-array": "arithmetic, comparisons and calls in kernels work on single elements: "
                    "an array or a row of one (A, or A[i] of a 2-D A) may only be indexed, "
                    "iterated, passed to len() or to your own device functions; shared and "
                    "local arrays have constant shapes",
    "kernel-global": "a kernel may read only its own variables, module constants (numbers, "
                     "strings, tuples of them and dtypes, assigned once at module level), "
                     "cuda, math, numpy and numba names, and the submission's own @cuda.jit "
                     "functions",
    "kernel-attribute": "in kernels, attributes are limited to .shape, .size, .ndim, .dtype, "
                        ".x/.y/.z, .real/.imag and the cuda, math, numpy and numba names "
                        "numba compiles",
    "mpi-comm": "use only the communicator you are given, as it is: COMM_WORLD, COMM_SELF, "
                "communicator classes, Dup, Clone, Split, Create*, Spawn, Connect, Accept, "
                "handles (f2py, py2f, fromhandle), Free, Abort, error handlers and the "
                "grader's tallies (calls, bytes_sent) are not allowed",
    "mpi-collective": "the ring all-reduce must be point-to-point (Send, Recv, Isend, Irecv, "
                      "Sendrecv, waits; Barrier is allowed): no collective such as "
                      "Allreduce, Reduce, Allgather, Bcast or Scatter, in mpi_2_ring.py or in "
                      "what it uses from other modules",
}


@dataclass(frozen=True)
class Violation:
    rule: str  # a key of RULES
    file: str  # the module's file name, e.g. "gemm_1_naive.py"
    line: int  # 1-based; 0 for the file as a whole
    text: str  # the code (shortened), e.g. "import ctypes"

    def describe(self) -> str:
        where = f"{self.file}, line {self.line}" if self.line else self.file
        return f"{where}: {self.text} — {RULES.get(self.rule, self.rule)}"


# ---------------------------------------------------------------------------------------
# Names

# Builtins that reach around the language (as calls or as values).
DANGER_BUILTINS = frozenset({
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "vars",
    "globals", "locals", "breakpoint", "open", "input", "memoryview", "id", "help", "exit",
    "quit", "SystemExit", "KeyboardInterrupt", "__build_class__",
})
# Bare dunder names a module may read (everything else, e.g. __builtins__, __loader__,
# __spec__, __class__, is an interpreter internal).
PLAIN_DUNDERS = frozenset({"__name__", "__file__", "__doc__", "__qualname__", "__module__",
                           "__all__", "__slots__", "__annotations__"})
# Dunder names a module or class may bind (__name__ is not one: rebinding it would make
# the `if __name__ == "__main__":` block, which is not checked, run).
BINDABLE_DUNDERS = frozenset({"__all__", "__slots__", "__doc__"})
# Special methods a class may reach on self, cls or super(), and define.
_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift")  # not matmul: a product
SAFE_DUNDERS = frozenset({
    "__init__", "__post_init__", "__call__", "__repr__", "__str__", "__format__", "__len__",
    "__getitem__", "__setitem__", "__delitem__", "__missing__", "__iter__", "__reversed__",
    "__next__", "__contains__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__hash__", "__bool__", "__enter__", "__exit__", "__neg__", "__pos__", "__abs__",
    "__invert__", "__index__", "__int__", "__float__", "__complex__", "__round__",
    "__trunc__", "__floor__", "__ceil__", "__divmod__", "__name__", "__doc__",
    "__qualname__",
    *(f"__{p}{op}__" for op in _OPERATORS for p in ("", "r", "i")),
})
# Attributes without an underscore that are interpreter internals (frames, closures, code).
INTERNALS = frozenset({
    "cell_contents", "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "f_trace",
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
    "ag_code", "tb_frame", "tb_next", "co_code", "co_consts", "co_names", "func_globals",
    "func_code", "func_closure", "im_func", "im_self", "mro", "py_func",
})
# Attribute names that reach around the language whatever they are taken from.
ATTR_BUILTINS = frozenset({"eval", "exec", "compile", "getattr", "setattr", "delattr", "vars",
                           "globals", "locals", "breakpoint", "open", "__import__",
                           "__build_class__"})
# Modules reached as attributes of other objects (typing.sys, dataclasses.builtins,
# enum.bltns, cuda.sys, np.ma.core.builtins...): never needed, always a way out.
DANGER_MODULES = frozenset({
    "sys", "os", "posix", "nt", "builtins", "bltns", "ctypes", "_ctypes", "cffi", "gc",
    "inspect", "importlib", "imp", "zipimport", "pkgutil", "runpy", "subprocess", "socket",
    "pickle", "cloudpickle", "dill", "marshal", "shelve", "pathlib", "shutil", "tempfile",
    "mmap", "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "codeop",
    "sysconfig", "atexit", "weakref", "traceback", "linecache", "faulthandler",
    "tracemalloc", "llvmlite", "stdlib_re", "_collections_abc", "_sys",
})
# Modules that the allowed stdlib helpers hold as attributes (Python 3.11-3.13; a test
# checks the running Python's against this list).
HELPER_MODULE_ATTRS = frozenset({
    "sys", "collections", "contextlib", "functools", "operator", "stdlib_re", "types",
    "warnings", "abc", "builtins", "copy", "inspect", "itertools", "keyword", "re", "bltns",
    "reprlib", "annotationlib",
})
# Raw memory, files and pickles (any base).
MEMORY_ATTRS = frozenset({
    "ctypeslib", "as_strided", "stride_tricks", "tofile", "dump", "dumps", "memmap",
    "fromfile", "frombuffer", "fromaddress", "from_address", "from_buffer", "ptr",
    "device_ctypes_pointer", "gpu_data", "get_ipc_handle", "open_ipc_array",
})
# Library matrix products (grader/checks/anticheat.py's PRODUCTS, copied: the grader does not
# import worker code here), and products in disguise.
PRODUCTS = frozenset({
    "matmul", "dot", "vdot", "inner", "tensordot", "einsum", "multi_dot", "vecdot",
    "matvec", "vecmat", "mm", "bmm", "addmm", "gemm", "sgemm", "dgemm", "gemmEx", "sgemmEx",
    "gemv", "sgemv", "gemm_ex", "batched_gemm", "cublas", "cublasLt", "cutensor",
    "__matmul__", "__rmatmul__", "__imatmul__",
    "einsum_path", "c_einsum", "outer", "kron", "cross", "matrix", "asmatrix", "bmat",
    "linalg", "matrix_power", "convolve", "correlate", "cov", "corrcoef", "polynomial",
    "fft",
})
# Reductions and host copies of operands (Parts 1 and 2, on anything but a module).
REDUCTIONS = frozenset({
    "sum", "prod", "cumsum", "cumprod", "mean", "nansum", "nanprod", "nanmean", "average",
    "max", "min", "amax", "amin", "argmax", "argmin", "ptp", "std", "var", "reduce",
    "reduceat", "accumulate", "broadcast_to", "repeat", "tile",
})
HOST_COPIES = frozenset({"copy_to_host", "tolist"})

# numpy. Everywhere: no raw memory or files, no modules hiding more of numpy.
NUMPY_DENY = frozenset({
    "lib", "core", "ctypeslib", "f2py", "distutils", "testing", "matrixlib", "ma", "char",
    "rec", "strings", "random", "version", "load", "loadtxt", "genfromtxt", "fromfile",
    "fromregex", "save", "savez", "savez_compressed", "savetxt", "memmap", "DataSource",
    "frombuffer", "from_dlpack", "show_config", "show_runtime", "info", "get_include",
})
NUMPY_SUBMODULES = frozenset({"typing", "dtypes", "exceptions"})
NP_SCALARS = frozenset({
    "bool", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "intp", "uintp", "int_", "uint", "intc", "uintc", "short", "ushort", "byte",
    "ubyte", "long", "ulong", "longlong", "ulonglong", "half", "single", "double",
    "longdouble", "float16", "float32", "float64", "complex64", "complex128", "csingle",
    "cdouble", "clongdouble",
})
NP_CONSTANTS = frozenset({"pi", "e", "inf", "nan", "euler_gamma"})
# Elementwise math numba compiles for the GPU on scalars (numba-cuda's ufunc table).
NP_KERNEL_UFUNCS = frozenset({
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "hypot", "sinh", "cosh",
    "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "degrees", "radians",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "square",
    "reciprocal", "absolute", "abs", "fabs", "sign", "floor", "ceil", "trunc", "rint",
    "maximum", "minimum", "fmax", "fmin", "power", "remainder", "mod", "fmod",
    "floor_divide", "divide", "true_divide", "multiply", "add", "subtract", "negative",
    "positive", "copysign", "isnan", "isinf", "isfinite", "signbit", "logaddexp",
    "logaddexp2", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift",
    "right_shift", "logical_and", "logical_or", "logical_xor", "logical_not", "greater",
    "greater_equal", "less", "less_equal", "equal", "not_equal", "conjugate",
})
# numpy in Parts 1 and 2, outside kernels: scalars, dtypes and host-side setup.
NP_TYPES = frozenset({"dtype", "ndarray", "number", "integer", "signedinteger",
                      "unsignedinteger", "floating", "complexfloating", "inexact", "generic",
                      "finfo", "iinfo"})
NP_LITERAL_ONLY = frozenset({"array", "asarray", "ascontiguousarray"})  # of literals only
NP_HOST_OK = (NP_SCALARS | NP_CONSTANTS | NP_TYPES | NP_LITERAL_ONLY | frozenset({
    "empty", "zeros", "ones", "full", "arange", "ceil", "floor", "sqrt", "log2", "prod",
    "isscalar", "result_type", "promote_types", "can_cast", "issubdtype", "errstate",
}))

# math functions numba compiles for the GPU (not fsum, prod, sumprod, dist: iterables).
MATH_KERNEL = frozenset({
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "copysign", "cos",
    "cosh", "degrees", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "floor", "fmod",
    "frexp", "gamma", "hypot", "isfinite", "isinf", "isnan", "ldexp", "lgamma", "log",
    "log10", "log1p", "log2", "modf", "pow", "radians", "remainder", "sin", "sinh", "sqrt",
    "tan", "tanh", "trunc", "cbrt", "pi", "e", "inf", "nan", "tau",
})

# numba: the CUDA target and types, nothing else.
NUMBA_TYPES = frozenset({
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "intp",
    "uintp", "intc", "uintc", "ssize_t", "size_t", "boolean", "float16", "float32",
    "float64", "complex64", "complex128", "bool_", "bool", "byte", "char", "uchar", "short",
    "ushort", "int_", "uint", "long_", "ulong", "longlong", "ulonglong", "double", "void",
    "none", "b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8",
    "c16", "optional", "half", "bfloat16",
})
NUMBA_TYPES_MODULES = frozenset({  # modules inside numba.types (numba 0.6x)
    "abstract", "collections", "common", "config", "containers", "ctypes", "enum", "errors",
    "function_type", "functions", "ir", "iterators", "itertools", "logging", "misc", "np",
    "npytypes", "scalars", "struct", "textwrap", "traceback", "types", "utils", "warnings",
})
# numba.cuda in kernels: the intrinsics, and what each has below it.
CUDA_KERNEL = {
    "threadIdx": {"x", "y", "z"}, "blockIdx": {"x", "y", "z"},
    "blockDim": {"x", "y", "z"}, "gridDim": {"x", "y", "z"},
    "shared": {"array"}, "local": {"array"}, "const": {"array_like"},
    "atomic": {"add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min",
               "nanmax", "nanmin", "compare_and_swap", "cas"},
    "fp16": None, "libdevice": None, "random": None,  # None: any public name
}
CUDA_KERNEL_CALLS = frozenset({
    "laneid", "warpsize", "grid", "gridsize", "syncthreads", "syncthreads_count",
    "syncthreads_and", "syncthreads_or", "syncwarp", "threadfence", "threadfence_block",
    "threadfence_system", "fma", "cbrt", "brev", "clz", "ffs", "popc", "selp", "activemask",
    "lanemask_lt", "all_sync", "any_sync", "eq_sync", "ballot_sync", "shfl_sync",
    "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "match_any_sync", "match_all_sync",
    "nanosleep", "ldca", "ldcg", "ldcs", "ldlu", "ldcv", "stcg", "stcs", "stwb", "stwt",
})
# numba.cuda outside kernels: allocation, copies, streams, events.
CUDA_HOST = frozenset({
    "jit", "to_device", "device_array", "device_array_like", "pinned_array",
    "pinned_array_like", "mapped_array", "mapped_array_like", "managed_array",
    "as_cuda_array", "is_cuda_array", "synchronize", "event", "event_elapsed_time",
    "is_available", "In", "Out", "InOut", "pinned", "mapped", "Dim3",
})  # not streams: work on a stream of its own could escape the grader's timing events
# Attributes of numba's and CuPy's objects that reach the CUDA context (reset, raw
# allocations) or the device behind the grader's back.
CONTEXT_ATTRS = frozenset({"context", "reset", "memalloc", "memhostalloc", "mempin",
                           "get_memory_info", "deallocations"})
CUDA_SUBMODULES = frozenset({"random", "libdevice"})

# nnkit.backend: what the handouts give students, by part.
BACKEND_ALL = frozenset({"cuda", "to_device", "empty", "zeros", "copy", "copy_into",
                         "synchronize"})
BACKEND_BY_PART = {"gemm": BACKEND_ALL, "net": BACKEND_ALL,
                   "mpi": BACKEND_ALL | {"to_host"}}

# mpi4py.MPI: no other communicator, no raw memory.
MPI_DENY = frozenset({
    "COMM_WORLD", "COMM_SELF", "COMM_NULL", "Win", "File", "Session", "Errhandler",
    "Alloc_mem", "Free_mem", "Attach_buffer", "Detach_buffer", "Flush_buffer",
    "Iflush_buffer", "Get_address", "Aint_add", "Aint_diff", "Init", "Init_thread",
    "Finalize", "Open_port", "Close_port", "Publish_name", "Unpublish_name", "Lookup_name",
    "Register_datarep", "Add_error_class", "Add_error_code", "Add_error_string",
    "Remove_error_class", "Remove_error_code", "Remove_error_string", "Pcontrol",
    "Grequest",
})
MPI_MEMORY = frozenset({"buffer", "memory", "pickle", "Pickle"})
MPI_CLASSES = frozenset({"Comm", "Intracomm", "Intercomm", "Topocomm", "Cartcomm",
                         "Graphcomm", "Distgraphcomm", "Group", "Info"})  # annotations only
COMM_DENY = frozenset({
    "Dup", "Dup_with_info", "Idup", "Idup_with_info", "Clone", "Split", "Split_type",
    "Get_parent", "Connect", "Accept", "Spawn", "Spawn_multiple", "Join", "Merge", "f2py",
    "py2f", "fromhandle", "handle", "Free", "Abort", "Disconnect", "Set_errhandler",
    "Call_errhandler", "Attach_buffer", "Detach_buffer", "Set_attr", "Get_attr",
    "Delete_attr", "Free_keyval",
})
# The kit's counting communicator keeps its tallies here; the grader reads them (a ring
# that called a collective is found by `calls`).
COUNTING = frozenset({"calls", "bytes_sent"})
COLLECTIVES = frozenset({
    "allreduce", "reduce", "reduce_scatter", "reduce_scatter_block", "allgather",
    "allgatherv", "gather", "gatherv", "scatter", "scatterv", "bcast", "alltoall",
    "alltoallv", "alltoallw", "scan", "exscan", "neighbor_allgather", "neighbor_allgatherv",
    "neighbor_alltoall", "neighbor_alltoallv", "neighbor_alltoallw",
})

# Harmless stdlib helpers, each with what of it is not harmless.
HELPERS = {
    "__future__": frozenset(), "typing": frozenset({"get_type_hints", "ForwardRef",
                                                    "evaluate_forward_ref"}),
    "dataclasses": frozenset({"make_dataclass"}), "functools": frozenset(),
    "itertools": frozenset(), "operator": frozenset({"attrgetter", "methodcaller"}),
    "collections": frozenset(), "collections.abc": frozenset(), "enum": frozenset(),
    "abc": frozenset(), "warnings": frozenset(), "time": frozenset(),
}
HELPER_GETATTR = frozenset({"attrgetter", "methodcaller", "get_type_hints", "ForwardRef",
                            "evaluate_forward_ref"})  # getattr and eval in disguise
# Submodules reachable by attribute (module -> attribute -> module).
SUBMODULES = {
    "numpy": {name: f"numpy.{name}" for name in NUMPY_SUBMODULES},
    "numba": {"cuda": "numba.cuda", "types": "numba.types"},
    "numba.cuda": {name: f"numba.cuda.{name}" for name in CUDA_SUBMODULES},
    "nnkit": {"backend": "nnkit.backend"},
    "nnkit.backend": {"cuda": "numba.cuda"},
    "mpi4py": {"MPI": "mpi4py.MPI"},
    "collections": {"abc": "collections.abc"},
}
TOP_MODULES = {"numpy", "math", "cmath", "numba", "nnkit", "mpi4py", *HELPERS}
# Top-level names that are installed or standard modules: an absolute `import X` finds
# them before a sibling X.py (the submission's folder is last on the worker's path).
KNOWN_PACKAGES = frozenset({
    "numpy", "numba", "numba_cuda", "llvmlite", "cupy", "cupyx", "cupy_backends", "cuda",
    "mpi4py", "mpich", "nnkit", "grader", "scipy", "torch", "jax", "jaxlib", "tensorflow",
    "sklearn", "matplotlib", "pytest", "nbgrader", "IPython", "PIL", "yaml", "zmq",
    "setuptools", "pip", "pkg_resources", "_distutils_hack", "typing_extensions", "six",
})

DECORATORS = frozenset({  # resolved decorators other functions may carry
    "functools.lru_cache", "functools.cache", "functools.wraps", "functools.cached_property",
    "functools.total_ordering", "functools.singledispatch", "functools.singledispatchmethod",
    "dataclasses.dataclass", "typing.overload", "typing.final", "typing.no_type_check",
    "abc.abstractmethod", "enum.unique",
})
KERNEL_BUILTINS = frozenset({"range", "min", "max", "abs", "int", "float", "bool", "len",
                             "round", "complex", "pow", "divmod", "print"})
KERNEL_EXCEPTIONS = frozenset({"NotImplementedError", "ValueError", "IndexError",
                               "RuntimeError", "AssertionError", "ZeroDivisionError",
                               "ArithmeticError", "OverflowError", "TypeError", "Exception"})
KERNEL_VALUE_ATTRS = frozenset({"shape", "size", "ndim", "dtype", "x", "y", "z", "real",
                                "imag"})
# Statements and expressions numba does not compile in a kernel.
KERNEL_REFUSED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda,
                  ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Import,
                  ast.ImportFrom, ast.Try, ast.With, ast.AsyncWith, ast.AsyncFor, ast.Yield,
                  ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal, ast.Delete,
                  ast.JoinedStr, ast.List, ast.Set, ast.Dict, ast.Starred, ast.Match,
                  *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


class Ref(NamedTuple):
    """What a name or attribute chain stands for: a module (deepest one resolved) and the
    attributes taken from it. Siblings are `sibling:<name>`; refused imports `!`."""

    module: str
    rest: tuple[str, ...] = ()

    @property
    def is_module(self) -> bool:
        return not self.rest

    def dotted(self) -> str:
        return ".".join((self.module, *self.rest))


REFUSED = Ref("!")


def _short(node: ast.AST, limit: int = 70) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - unparse of an odd tree: show its type
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _collective(name: str) -> bool:
    low = name.lower()
    if low.endswith("_init"):
        low = low[:-5]
    return low in COLLECTIVES or (low.startswith("i") and low[1:] in COLLECTIVES)


def _main_guard(test: ast.expr) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


# ---------------------------------------------------------------------------------------
# Reading the folder


def _listing(folder: Path) -> dict[str, str]:
    """Entries of the folder: name -> 'file', 'link', 'dir' or 'other' (never followed)."""
    kinds = {}
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    if entry.is_symlink():
                        kinds[entry.name] = "link"
                    elif entry.is_dir(follow_symlinks=False):
                        kinds[entry.name] = "dir"
                    elif entry.is_file(follow_symlinks=False):
                        kinds[entry.name] = "file"
                    else:
                        kinds[entry.name] = "other"
                except OSError:
                    kinds[entry.name] = "other"
    except OSError:
        pass
    return kinds


SHADOW_SUFFIXES = tuple(dict.fromkeys((*importlib.machinery.EXTENSION_SUFFIXES,
                                       *importlib.machinery.BYTECODE_SUFFIXES)))


def _sibling_problem(name: str, kinds: dict[str, str]) -> str | None:
    """Why sibling `name` cannot be checked as name.py, or None."""
    kind = kinds.get(f"{name}.py")
    if name in kinds:
        return f"{name}/ is a package or file that Python imports instead of {name}.py"
    for suffix in SHADOW_SUFFIXES:
        if f"{name}{suffix}" in kinds:
            return f"{name}{suffix} would be imported instead of {name}.py"
    if kind == "link":
        return f"{name}.py is a link"
    if kind != "file":
        return f"{name}.py is not a regular file"
    return None


_INSTALLED: dict[str, bool] = {}


def _installed(name: str) -> bool:
    """Does this interpreter (the workers' own) have a top-level module of this name?
    Asked of the import system's finders, which only look at paths; any doubt is a yes."""
    if name not in _INSTALLED:
        try:
            _INSTALLED[name] = importlib.util.find_spec(name) is not None
        except Exception:  # noqa: BLE001 - a finder that fails: assume it is there
            _INSTALLED[name] = True
    return _INSTALLED[name]


def _read(path: Path) -> tuple[bytes | None, str | None]:
    """(source, None), or (None, why it is refused); (None, None) when missing."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(
            os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    except OSError as err:
        if path.is_symlink():
            return None, f"{path.name} is a link"
        return None, f"{path.name} cannot be read ({err.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"{path.name} is not a regular file"
        if info.st_size > MAX_BYTES:
            return None, f"{path.name} is larger than 1 MiB"
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            return None, f"{path.name} is larger than 1 MiB"
        return b"".join(chunks), None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------
# Per-module facts, gathered before checking


@dataclass
class _Module:
    name: str
    file: str
    tree: ast.Module
    aliases: dict[str, Ref] = field(default_factory=dict)  # module-level import bindings
    functions: dict[str, ast.AST] = field(default_factory=dict)  # module-level defs
    classes: set[str] = field(default_factory=set)
    kernels: set[str] = field(default_factory=set)  # module-level @cuda.jit functions
    constants: set[str] = field(default_factory=set)
    assigned: dict[str, ast.expr] = field(default_factory=dict)  # single module-level value
    bound: set[str] = field(default_factory=set)  # every name bound at module level
    siblings: list[str] = field(default_factory=list)
    rebinds: list[tuple[str, ast.AST]] = field(default_factory=list)


def _module_scope(body: list[ast.stmt]):
    """Statements run at module level (into if/for/while/try/with, not defs, classes or
    the __main__ block)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            if not _main_guard(stmt.test):
                yield from _module_scope(stmt.body)
            yield from _module_scope(stmt.orelse)
        elif isinstance(stmt, ast.For | ast.While | ast.AsyncFor):
            yield from _module_scope(stmt.body)
            yield from _module_scope(stmt.orelse)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            yield from _module_scope(stmt.body)
        elif isinstance(stmt, ast.Try) or (hasattr(ast, "TryStar")
                                           and isinstance(stmt, ast.TryStar)):
            yield from _module_scope(stmt.body)
            for handler in stmt.handlers:
                yield from _module_scope(handler.body)
            yield from _module_scope(stmt.orelse)
            yield from _module_scope(stmt.finalbody)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                yield from _module_scope(case.body)


def _stores(node: ast.AST):
    """Name nodes stored by an expression or statement, not entering nested scopes."""
    todo = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.Name) and isinstance(cur.ctx, ast.Store | ast.Del):
            yield cur
        for child in ast.iter_child_nodes(cur):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                              | ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp
                              | ast.GeneratorExp):
                todo.append(child)


def _bound_in_function(func: ast.AST) -> set[str]:
    """Names local to a function (parameters and everything it binds), not looking into
    nested scopes; names declared global or nonlocal are left out."""
    names: set[str] = set()
    args = func.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            names.add(arg.arg)
    declared: set[str] = set()
    body = func.body if isinstance(func.body, list) else [func.body]
    todo = list(body)
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.Global | ast.Nonlocal):
            declared.update(cur.names)
        elif isinstance(cur, ast.Name) and isinstance(cur.ctx, ast.Store | ast.Del):
            names.add(cur.id)
        elif isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(cur.name)
            todo.extend(cur.decorator_list)
            continue
        elif isinstance(cur, ast.Import | ast.ImportFrom):
            for alias in cur.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(cur, ast.ExceptHandler) and cur.name:
            names.add(cur.name)
        elif isinstance(cur, ast.MatchAs | ast.MatchStar) and cur.name:
            names.add(cur.name)
        elif isinstance(cur, ast.MatchMapping) and cur.rest:
            names.add(cur.rest)
        if isinstance(cur, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp
                      | ast.GeneratorExp):
            continue
        todo.extend(ast.iter_child_nodes(cur))
    return names - declared


# ---------------------------------------------------------------------------------------
# The checker


class _Checker:
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

    def _import_ref(self, dotted: str) -> Ref:
        """The module an absolute import path names, REFUSED if not allowed."""
        parts = dotted.split(".")
        if parts[0] not in TOP_MODULES:
            if self._is_sibling(parts[0], relative=False) and len(parts) == 1:
                return Ref(f"sibling:{parts[0]}")
            return REFUSED
        current = parts[0]
        if current == "collections" and len(parts) > 1 and parts[1] == "abc":
            return Ref("collections.abc") if len(parts) == 2 else REFUSED
        for part in parts[1:]:
            nxt = SUBMODULES.get(current, {}).get(part)
            if nxt is None or (nxt == "mpi4py.MPI" and self.part != "mpi"):
                return REFUSED
            current = nxt
        if current in ("nnkit", "mpi4py") or (current.startswith("mpi4py")
                                              and self.part != "mpi"):
            return REFUSED  # only as a path to nnkit.backend and mpi4py.MPI
        return Ref(current)

    def _from_ref(self, node: ast.ImportFrom, name: str) -> Ref:
        """What `from <node.module> import name` binds (REFUSED when not allowed)."""
        if node.level:
            if node.level > 1:
                return REFUSED
            if node.module is None:
                return Ref(f"sibling:{name}") if self._is_sibling(name, True) else REFUSED
            if "." in node.module or not self._is_sibling(node.module, True):
                return REFUSED
            return Ref(f"sibling:{node.module}", (name,))
        module = node.module or ""
        top = module.split(".")[0]
        if top not in TOP_MODULES:
            if "." not in module and self._is_sibling(module, relative=False):
                return Ref(f"sibling:{module}", (name,))
            return REFUSED
        if module in ("nnkit", "mpi4py"):
            base = Ref(module) if module != "mpi4py" or self.part == "mpi" else REFUSED
        else:
            base = self._import_ref(module)
        if base is REFUSED:
            return REFUSED
        sub = SUBMODULES.get(base.module, {}).get(name)
        if sub is not None:
            if sub == "mpi4py.MPI" and self.part != "mpi":
                return REFUSED
            return Ref(sub)
        if base.module in ("nnkit", "mpi4py"):
            return REFUSED
        return Ref(base.module, (name,))

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
                                and isinstance(stored.ctx, ast.Store | ast.Del)):
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

    # resolving ---------------------------------------------------------------------------

    def _is_jit(self, decorator: ast.expr, aliases: dict[str, Ref]) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        ref = self._resolve_static(target, aliases)
        return ref is not None and ref == Ref("numba.cuda", ("jit",))

    def _resolve_static(self, node: ast.AST, aliases: dict[str, Ref],
                        depth: int = 0) -> Ref | None:
        """The Ref of a Name or attribute chain rooted at an import alias (module level)."""
        if depth > 50:
            return None
        if isinstance(node, ast.Name):
            ref = aliases.get(node.id)
            return self._deref(ref, depth) if ref is not None else None
        if isinstance(node, ast.Attribute):
            base = self._resolve_static(node.value, aliases, depth + 1)
            return self._extend(base, node.attr, depth) if base is not None else None
        return None

    def _extend(self, base: Ref, attr: str, depth: int = 0) -> Ref:
        if base is REFUSED:
            return REFUSED
        if base.is_module:
            sub = SUBMODULES.get(base.module, {}).get(attr)
            if sub is not None:
                return Ref(sub)
            if base.module.startswith("sibling:"):
                return self._deref(Ref(base.module, (attr,)), depth)
        return Ref(base.module, (*base.rest, attr))

    def _deref(self, ref: Ref, depth: int = 0) -> Ref:
        """sibling:X.name -> what X binds name to, when X imported it."""
        if (ref.module.startswith("sibling:") and len(ref.rest) >= 1 and depth < 20):
            other = self.modules.get(ref.module.split(":", 1)[1])
            if other is not None and ref.rest[0] in other.aliases:
                inner = self._deref(other.aliases[ref.rest[0]], depth + 1)
                for attr in ref.rest[1:]:
                    inner = self._extend(inner, attr, depth + 1)
                return inner
        return ref

    def _sibling_def(self, ref: Ref) -> tuple[_Module, str] | None:
        if ref.module.startswith("sibling:") and len(ref.rest) == 1:
            other = self.modules.get(ref.module.split(":", 1)[1])
            if other is not None:
                return other, ref.rest[0]
        return None

    def is_kernel_ref(self, ref: Ref | None) -> bool:
        found = self._sibling_def(ref) if ref is not None else None
        return found is not None and found[1] in found[0].kernels

    def is_constant_ref(self, ref: Ref | None) -> bool:
        found = self._sibling_def(ref) if ref is not None else None
        return found is not None and found[1] in found[0].constants

    def _constant(self, node: ast.AST, info: _Module) -> bool:
        """A constant expression: literals, tuples, arithmetic, constants and dtypes."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int | float | complex | str | bool | type(None))
        if isinstance(node, ast.Tuple):
            return all(self._constant(e, info) for e in node.elts)
        if isinstance(node, ast.UnaryOp):
            return self._constant(node.operand, info)
        if isinstance(node, ast.BinOp):
            return (not isinstance(node.op, ast.MatMult) and self._constant(node.left, info)
                    and self._constant(node.right, info))
        if isinstance(node, ast.BoolOp):
            return all(self._constant(v, info) for v in node.values)
        if isinstance(node, ast.Compare):
            return all(self._constant(v, info) for v in (node.left, *node.comparators))
        if isinstance(node, ast.IfExp):
            return all(self._constant(v, info) for v in (node.test, node.body, node.orelse))
        if isinstance(node, ast.Subscript):
            return self._constant(node.value, info) and self._constant(node.slice, info)
        if isinstance(node, ast.Name):
            if node.id in info.constants:
                return True
            ref = info.aliases.get(node.id)
            ref = self._deref(ref) if ref is not None else None
            return ref is not None and not ref.is_module and (self.is_constant_ref(ref)
                                                              or _kernel_path(ref))
        if isinstance(node, ast.Attribute):
            ref = self._resolve_static(node, info.aliases)
            return ref is not None and not ref.is_module and (_kernel_path(ref)
                                                              or self.is_constant_ref(ref))
        if isinstance(node, ast.Call):
            if node.keywords or not all(self._constant(a, info) for a in node.args):
                return False
            if isinstance(node.func, ast.Name) and node.func.id in (
                    "int", "float", "bool", "complex", "min", "max", "abs", "round"):
                return node.func.id not in info.bound
            ref = self._resolve_static(node.func, info.aliases)
            return ref is not None and _kernel_path(ref) and ref.module in (
                "numpy", "numba", "numba.types", "numba.cuda", "math")
        return False

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
            elif attr not in info.aliases:
                scope[name] = "all"  # a module-level value: assume any of its code
        return scope


def _kernel_path(ref: Ref) -> bool:
    """Is this (non-local) name something a kernel may use (read or call)?"""
    module, rest = ref.module, ref.rest
    if module == "numba.cuda":
        if not rest:
            return True
        head = rest[0]
        if head in NUMBA_TYPES or head in CUDA_KERNEL_CALLS:
            return len(rest) == 1
        if head in CUDA_KERNEL:
            below = CUDA_KERNEL[head]
            if len(rest) == 1:
                return True
            return len(rest) == 2 and (below is None and not rest[1].startswith("_")
                                       or below is not None and rest[1] in below)
        return False
    if module in ("numba.cuda.random", "numba.cuda.libdevice"):
        return len(rest) <= 1 and all(not r.startswith("_") for r in rest)
    if module == "math":
        return len(rest) <= 1 and all(r in MATH_KERNEL for r in rest)
    if module == "cmath":
        return len(rest) <= 1 and all(not r.startswith("_") for r in rest)
    if module == "numpy":
        return len(rest) <= 1 and all(r in NP_SCALARS | NP_CONSTANTS | NP_KERNEL_UFUNCS
                                      for r in rest)
    if module == "numba":
        return len(rest) <= 1 and all(r in NUMBA_TYPES for r in rest)
    if module == "numba.types":
        return len(rest) <= 1 and all(not r.startswith("_") and r not in NUMBA_TYPES_MODULES
                                      for r in rest)
    return False


@dataclass
class _Scope:
    kind: str  # "module", "class", "function"
    names: set[str] = field(default_factory=set)  # local names (functions)
    params: set[str] = field(default_factory=set)  # the function's parameters
    self_name: str | None = None  # the method's self/cls, when not rebound
    method: bool = False  # a function directly in a class body


@dataclass
class _Kernel:
    name: str
    locals: set[str]
    ranks: dict[str, int]


class _Visitor(ast.NodeVisitor):
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
        if scope.method and node.args.args and not any(
                isinstance(d, ast.Name) and d.id == "staticmethod"
                for d in node.decorator_list):
            first = (node.args.posonlyargs + node.args.args)[0].arg
            rebound = any(isinstance(n, ast.Name) and n.id == first
                          and isinstance(n.ctx, ast.Store | ast.Del) for n in ast.walk(node))
            scope.self_name = None if rebound else first
        elif not scope.method:
            # a nested function sees its method's self as long as it does not rebind it
            outer = next((s.self_name for s in reversed(self.scopes) if s.self_name), None)
            if outer is not None and outer not in names:
                scope.self_name = outer
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
        self.scopes.append(_Scope("class"))
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()
        self.top = previous_top

    def visit_Lambda(self, node: ast.Lambda) -> None:
        if self._kernel_refuses(node):
            return
        self._visit_signature(node)
        self.scopes.append(_Scope("function", _bound_in_function(node)))
        self.local_aliases.append({})
        self.visit(node.body)
        self.local_aliases.pop()
        self.scopes.pop()

    def _comprehension(self, node) -> None:
        if self._kernel_refuses(node):
            return
        names = set()
        for gen in node.generators:
            names.update(n.id for n in _stores(gen.target))
        self.scopes.append(_Scope("function", names))
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
        for name in node.kwd_attrs:  # `case C(attr=...)` reads attributes by name
            if name.startswith("_") or name in INTERNALS:
                self.flag("private", node, f"{_short(node.cls)}({name}=...)")
        self.generic_visit(node)

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
            if isinstance(root, ast.Name) and (self._imported(root.id) or (
                    through_attribute and self._parameter(root.id))):
                self.flag("module-assign", node)
        self.generic_visit(node)

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

    def _imported(self, name: str) -> bool:
        """A module-level import, def or class name (not shadowed)."""
        if self._local(name):
            return any(name in a for a in self.local_aliases[1:])
        return name in self.info.aliases or name in self.info.functions or (
            name in self.info.classes)

    def visit_Name(self, node: ast.Name) -> None:
        if id(node) in self.handled:
            return
        name = node.id
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
        elif name.startswith("__") and name.endswith("__") and name not in BINDABLE_DUNDERS:
            self.flag("private", node, name)

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

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = node.value
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
            if isinstance(root, ast.Name) and (self._imported(root.id)
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

    def _super_call(self, base: ast.AST) -> bool:
        return (isinstance(base, ast.Call) and isinstance(base.func, ast.Name)
                and base.func.id == "super" and self._in_method())

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
        sibling_module = ref is not None and ref.is_module and ref.module.startswith(
            "sibling:")
        if attr.startswith("_"):
            dunder = attr.startswith("__") and attr.endswith("__")
            if self._self_like(base) or self._super_call(base):
                return "private" if dunder and attr not in SAFE_DUNDERS else None
            if sibling_module and not dunder:
                return None
            return "private"
        if attr in INTERNALS:
            return "private"
        if attr in ATTR_BUILTINS or attr in HELPER_GETATTR:
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
            if attr in PRODUCTS:
                return "product"
            if self.kernel is None and attr in REDUCTIONS and not (
                    ref is not None and ref.module.startswith("numba.cuda")):
                return "array-library"
            if attr in HOST_COPIES:
                return "host-copy"
        if attr in COUNTING and self.part == "mpi" and not self._self_like(base):
            return "mpi-comm"
        if attr in COMM_DENY or attr.startswith(("Create", "Split", "Spawn", "Dup", "Idup")):
            if not (ref is not None and ref.is_module) and not self._self_like(base):
                return "mpi-comm"
        if (self.ring == "all" or (isinstance(self.ring, set) and self.top in self.ring)) \
                and _collective(attr) and (ref is None or ref.module == "mpi4py.MPI"):
            return "mpi-collective"
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
            if attr in MPI_CLASSES:
                return None if self.annotation else "mpi-comm"
            return None
        if module in HELPERS:
            if attr in HELPERS[module]:
                return "builtin" if attr in HELPER_GETATTR else "import"
            if (attr in DANGER_MODULES or attr in HELPER_MODULE_ATTRS) and SUBMODULES.get(
                    module, {}).get(attr) is None:
                return "import"
            return None
        return "import"

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and not self._local(func.id) and not (
                self._module_name(func.id)):
            if func.id == "super":
                self.handled.add(id(func))
                if not self._in_method():
                    self.flag("builtin", node, "super() outside a method")
            elif func.id == "type" and (len(node.args) != 1 or node.keywords):
                self.flag("builtin", node, f"type() with {len(node.args)} arguments")
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
        for arg in (*node.args, *(k.value for k in node.keywords)):  # to a launch helper
            if self._kernel_name(arg):
                self.handled.add(id(arg))
        if self.kernel is not None:
            self._kernel_call(node)
        self.generic_visit(node)

    # kernels ---------------------------------------------------------------------------

    def _kernel_facts(self, node, names: set[str]) -> _Kernel:
        """Array ranks from use: the most indices any subscript chain of a name takes."""
        ranks: dict[str, int] = {}
        inner = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Subscript):
                inner.add(id(sub.value))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript) and id(sub) not in inner:
                root, count = _chain(sub)
                if root is not None and root in names:
                    ranks[root] = max(ranks.get(root, 0), count)
        facts = _Kernel(node.name, names, ranks)
        # declared arrays and aliases, in order
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name):
                target, value = stmt.targets[0].id, stmt.value
                declared = self._declared_rank(value, facts)
                if declared:
                    ranks[target] = max(ranks.get(target, 0), declared)
            elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
                rank = self._rank_of(stmt.iter, facts)
                if rank > 1:
                    ranks[stmt.target.id] = max(ranks.get(stmt.target.id, 0), rank - 1)
        return facts

    def _declared_rank(self, value: ast.AST, facts: _Kernel) -> int:
        if isinstance(value, ast.Call):
            ref = self.resolve(value.func)
            if ref is not None and ref.module == "numba.cuda" and ref.rest in (
                    ("shared", "array"), ("local", "array")):
                shape = value.args[0] if value.args else next(
                    (k.value for k in value.keywords if k.arg == "shape"), None)
                return len(shape.elts) if isinstance(shape, ast.Tuple) else 1
            if ref is not None and ref.module == "numba.cuda" and ref.rest == (
                    "const", "array_like") and value.args:
                return self._rank_of(value.args[0], facts)
            return 0
        return self._rank_of(value, facts)

    def _rank_of(self, expr: ast.AST, facts: _Kernel) -> int:
        """Dimensions left of an array expression (0: an element or not an array)."""
        if isinstance(expr, ast.Name):
            return facts.ranks.get(expr.id, 0) if expr.id in facts.locals else 0
        if isinstance(expr, ast.Subscript):
            root, count = _chain(expr)
            if root is not None and root in facts.locals:
                return max(facts.ranks.get(root, 0) - count, 0)
        return 0

    def _array(self, expr: ast.AST) -> bool:
        return self.kernel is not None and self._rank_of(expr, self.kernel) > 0

    def _kernel_assign(self, targets: list[ast.AST], value: ast.AST) -> None:
        for target in targets:
            if isinstance(target, ast.Subscript) and (self._array(target)
                                                      or self._array(value)):
                self.flag("kernel-array", target)
                return

    def _kernel_read(self, node: ast.Name) -> None:
        """A Name read in a kernel (not a call target, not an attribute base of a module)."""
        name = node.id
        kernel = self.kernel
        if name in kernel.locals:
            return
        if name in self.info.bound:
            if name in self.info.constants or name in self.info.kernels:
                return
            ref = self.info.aliases.get(name)
            if ref is not None:
                ref = self.c._deref(ref)
                if ref.is_module and ref.module in ("numba.cuda", "math", "cmath", "numpy",
                                                    "numba", "numba.types",
                                                    "numba.cuda.random",
                                                    "numba.cuda.libdevice"):
                    return
                if (_kernel_path(ref) or self.c.is_constant_ref(ref)
                        or self.c.is_kernel_ref(ref)):
                    return
            self.flag("kernel-global", node, f"{name} in kernel {kernel.name}")
            return
        if name in KERNEL_BUILTINS or name in KERNEL_EXCEPTIONS or name in (
                "True", "False", "None"):
            return
        self.flag("kernel-global", node, f"{name} in kernel {kernel.name}")

    def _kernel_call(self, node: ast.Call) -> None:
        func, kernel = node.func, self.kernel
        allowed, array_args = False, False
        if isinstance(func, ast.Name):
            name = func.id
            if name in DANGER_BUILTINS and not self._local(name):
                return  # visit_Name reports it as a builtin
            self.handled.add(id(func))
            if name in kernel.locals:
                allowed = False
            elif name in self.info.bound:
                ref = self.info.aliases.get(name)
                ref = self.c._deref(ref) if ref is not None else None
                if name in self.info.kernels or self.c.is_kernel_ref(ref):
                    allowed = array_args = True
                elif ref is not None and _kernel_path(ref) and not ref.is_module:
                    allowed = True
            elif name in KERNEL_BUILTINS or name in KERNEL_EXCEPTIONS:
                allowed = True
                array_args = name == "len"
        elif isinstance(func, ast.Attribute):
            ref = self.resolve(func)
            if ref is not None and not ref.is_module and (
                    _kernel_path(ref) or self.c.is_kernel_ref(ref)):
                allowed = True
                array_args = self.c.is_kernel_ref(ref) or (
                    ref.module == "numba.cuda" and ref.rest[:1] in (("atomic",), ("const",)))
            else:
                self.handled.add(id(func))  # judged here: kernel-call, not kernel-attribute
        if not allowed:
            self.flag("kernel-call", node, f"{_short(node)} in kernel {kernel.name}")
            return
        ref = self.resolve(func)
        if ref is not None and ref.module == "numba.cuda" and ref.rest in (
                ("shared", "array"), ("local", "array")):
            shape = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "shape"), None)
            if shape is not None and not (self.c._constant(shape, self.info) and not any(
                    isinstance(n, ast.Name) and n.id in kernel.locals for n in ast.walk(shape))):
                self.flag("kernel-array", node, f"{_short(node)}: the shape is not a constant")
                return
        if not array_args:
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if self._array(arg):
                    self.flag("kernel-array", node, f"{_short(node)} in kernel {kernel.name}")
                    return


def _launch(node: ast.AST) -> bool:
    """x[grid, block], x[grid, block, stream] or x[grid, block, stream, shared bytes]."""
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple)
            and 2 <= len(node.slice.elts) <= 4)


def _chain(node: ast.Subscript) -> tuple[str | None, int]:
    """(root name, number of indices) of a subscript chain such as A[i][k] or A[i, k]."""
    count, cur = 0, node
    while isinstance(cur, ast.Subscript):
        index = cur.slice
        count += len(index.elts) if isinstance(index, ast.Tuple) else 1
        cur = cur.value
    return (cur.id if isinstance(cur, ast.Name) else None), count


_VECTOR_TYPE = re.compile(r"(u?(char|short|int|long|longlong)|float|double)[1-4]"
                          r"|u?int(8|16|32|64)x[1-4]|float(32|64)x[1-4]")


def _vector_type(name: str) -> bool:
    """numba.cuda's vector types: float32x4, int2, uchar3, ..."""
    return _VECTOR_TYPE.fullmatch(name) is not None


def check(folder: Path, module: str, part: str) -> list[Violation]:
    """The rules `module`.py of a submission folder, and the sibling modules it imports,
    break when graded in `part` ("gemm", "net" or "mpi"). Files are read, never run."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, not {part!r}")
    checker = _Checker(Path(folder), part)
    try:
        checker.load(module)
        checker.check_all(module)
    except (RecursionError, MemoryError):
        checker.violations.append(Violation("file", f"{module}.py", 0,
                                            "nested too deeply to be checked"))
    except Exception as err:  # noqa: BLE001 - a gap in this checker: fail closed
        checker.violations.append(Violation(
            "file", f"{module}.py", 0, f"could not be checked ({type(err).__name__}: "
            f"{str(err)[:80]}); please tell the course staff"))
    unique = list(dict.fromkeys(checker.violations))
    return sorted(unique, key=lambda v: (v.file != f"{module}.py", v.file, v.line, v.rule))


def summary(violations: list[Violation], limit: int = 3) -> str:
    """The first few violations, described, for a one-line feedback message."""
    described = [v.describe() for v in violations[:limit]]
    more = f" (and {len(violations) - limit} more)" if len(violations) > limit else ""
    return "; ".join(described) + more


# ---------------------------------------------------------------------------------------
# Which breaches fail an item

# Rules with no innocent reading in graded code, and whose harm the run-time layers may
# not see (a stride trick reading memory, a tally of the counting communicator reset, a
# private attribute of the kit): they fail the item. The other rules describe the style
# the assignment asks for (kernels numba compiles, numpy for set-up only, ...) and are
# reported as notes: the audit hook, the launch replay and the module photograph judge
# what the code does, so an unusual but honest submission keeps its points.
CHEAT_RULES = frozenset({"file", "builtin", "private", "memory", "module-assign", "mpi-comm",
                         "mpi-collective"})
# Imports that fail the item: ways around the language, the kit's and grader's internals,
# and libraries that compute what the student must write.
CHEAT_IMPORTS = frozenset({
    "ctypes", "_ctypes", "cffi", "gc", "inspect", "importlib", "builtins", "types", "mmap",
    "pickle", "marshal", "code", "codeop", "runpy", "grader", "nnkit", "torch", "jax",
    "jaxlib", "tensorflow", "scipy", "sklearn", "cupy", "cupyx", "cupy_backends",
    "subprocess", "socket", "multiprocessing", "pty", "_thread", "_posixsubprocess",
})


def is_cheat(violation: Violation) -> bool:
    """Does this breach fail the item (else it is a note)?"""
    if violation.rule in CHEAT_RULES:
        return True
    if violation.rule != "import":
        return False
    words = violation.text.replace(",", " ").split()
    names = words[1:2] if words[:1] == ["from"] else words[1:]
    return any(name.split(".")[0] in CHEAT_IMPORTS for name in names if name != "as")
