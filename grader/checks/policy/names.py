"""What graded code may name: allow- and deny-lists of builtins, dunders, attributes and
modules, a resolved reference (Ref), and small helpers on names.
"""

from __future__ import annotations

import ast
import re
import types
from typing import NamedTuple

# ---------------------------------------------------------------------------------------
# Names

# Builtins that reach around the language (as calls or as values).
DANGER_BUILTINS = frozenset({
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "vars",
    "globals", "locals", "breakpoint", "open", "input", "memoryview", "id", "help", "exit",
    "quit", "SystemExit", "KeyboardInterrupt", "__build_class__",
})
# A module's descriptive metadata (`__author__ = "..."`): names nothing in Python reads.
METADATA_DUNDERS = frozenset({"__author__", "__version__", "__license__", "__email__",
                              "__credits__", "__maintainer__", "__status__", "__copyright__",
                              "__date__", "__contact__"})
# Bare dunder names a module may read (everything else, e.g. __builtins__, __loader__,
# __spec__, __class__, is an interpreter internal).
PLAIN_DUNDERS = frozenset({"__name__", "__file__", "__doc__", "__qualname__", "__module__",
                           "__all__", "__slots__", "__annotations__"}) | METADATA_DUNDERS
# Dunder attributes that are a name or a text, readable on anything (`type(self).__name__`
# and `self.__class__.__name__` in a __repr__).
NAME_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__"})
# Dunder names a module or class may bind (__name__ is not one: rebinding it would make
# the `if __name__ == "__main__":` block, which is not checked, run).
BINDABLE_DUNDERS = frozenset({"__all__", "__slots__", "__doc__"}) | METADATA_DUNDERS
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
# Of those, the methods of NumPy's and CuPy's arrays: the products on an object whose
# kind the source does not tell.
ARRAY_PRODUCTS = frozenset({"dot"})
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

# mpi4py.MPI: no other communicator, no raw memory. (COMM_NULL is allowed: it reaches no
# process, and `if comm == MPI.COMM_NULL: return` is a careful student's first line.)
MPI_DENY = frozenset({
    "COMM_WORLD", "COMM_SELF", "Win", "File", "Session", "Errhandler",
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
# Not Free: persistent requests (Send_init, Recv_init) and derived datatypes are freed by
# the same name, and the ring's communicator refuses it at run time (a data-parallel
# function that freed its communicator would only fail its own cases).
COMM_DENY = frozenset({
    "Dup", "Dup_with_info", "Idup", "Idup_with_info", "Clone", "Split", "Split_type",
    "Get_parent", "Connect", "Accept", "Spawn", "Spawn_multiple", "Join", "Merge", "f2py",
    "py2f", "fromhandle", "handle", "Disconnect", "Set_errhandler",
    "Call_errhandler", "Attach_buffer", "Detach_buffer", "Set_attr", "Get_attr",
    "Delete_attr", "Free_keyval",
})
# Derived-datatype constructors (MPI.FLOAT.Create_contiguous(d): a row of d floats as one
# element of a Scatterv): methods of datatypes, which no communicator has, so outside what
# the Create* rule is about. A name bound to one of them may also be freed (`row.Free()`).
DATATYPE_CTORS = frozenset({
    "Create_contiguous", "Create_vector", "Create_hvector", "Create_indexed",
    "Create_hindexed", "Create_indexed_block", "Create_hindexed_block", "Create_subarray",
    "Create_darray", "Create_struct", "Create_resized",
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
    "copy": frozenset(),  # copy and deepcopy only (attributes.py)
}
# Of `types`, what builds data and nothing else (the rest makes functions, code, modules
# and classes, or reaches frames): SimpleNamespace for a bag of layers or sizes.
TYPES_ALLOWED = frozenset({"SimpleNamespace", "MappingProxyType", "NoneType",
                           "EllipsisType", "NotImplementedType"})  # not GenericAlias: it
# forwards attribute lookups to what it wraps (types.GenericAlias(np, ()).lib hid np.lib)
TYPES_REFUSED = frozenset(n for n in dir(types) if not n.startswith("_")) - TYPES_ALLOWED
HELPERS["types"] = TYPES_REFUSED
HELPER_GETATTR = frozenset({"attrgetter", "methodcaller", "get_type_hints", "ForwardRef",
                            "evaluate_forward_ref",
                            *TYPES_REFUSED})  # getattr and eval in disguise, code makers
# What makes an object an array over any address (NumPy's, CUDA's, DLPack's protocols):
# refused as names and as strings (a dict key, a keyword), red team round four.
MEMORY_DUNDERS = frozenset({"__array_interface__", "__cuda_array_interface__",
                            "__array_struct__", "__dlpack__", "__dlpack_device__",
                            "__array__", "__buffer__"})
# A str.format field that looks up an attribute starting with an underscore.
FORMAT_PRIVATE = re.compile(r"\{[^{}!:]*\.\s*_")
# The public methods and fields of a namedtuple, which start with an underscore so as not
# to clash with its fields.
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})
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
# Of those, the ones after which a method is still called with its own object first.
SELF_KEEPING = frozenset({"functools.lru_cache", "functools.cache", "functools.cached_property",
                          "abc.abstractmethod", "typing.overload", "typing.final",
                          "typing.no_type_check"})
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


DEEPCOPY = Ref("copy", ("deepcopy",))  # allowed as deepcopy(x) only


def mpi_class(ref: Ref | None) -> bool:
    """Does `ref` stand for a communicator class of mpi4py (MPI.Intracomm, ...)? Allowed
    in annotations and isinstance tests only."""
    return (ref is not None and ref.module == "mpi4py.MPI" and len(ref.rest) == 1
            and ref.rest[0] in MPI_CLASSES)


REFUSED = Ref("!")


def _short(node: ast.AST, limit: int = 70) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - unparse of an odd tree: show its type
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_collective(name: str) -> bool:
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
