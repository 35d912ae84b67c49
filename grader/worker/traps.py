"""Run-time traps for library matrix products, armed in the worker from before the
submission is imported until the job ends (see grader/checks/anticheat.py for the whole picture).

NumPy's and CuPy's entry points (matmul, dot, einsum, ..., every cuBLAS GEMM wrapper) are
replaced, under every name their modules give them, by traps that record the call and
raise ForbiddenCall; importing torch, jax, tensorflow or a BLAS wrapper is refused; and
the `@` operator, `dot()` method and `__matmul__` of NumPy and CuPy arrays are trapped in
the array type itself (C slots rewritten through ctypes, each only after its layout
checks out). The traps give the ordinary cheat a clear message; the verdict rests on the
replay of the submission's kernels (grader/worker/launches.py) and the audit hook
(grader/worker/guard.py), which the submission cannot undo.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import json
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

# Names of library matrix products (NumPy, CuPy, cuBLAS, SciPy's BLAS, PyTorch, JAX).
PRODUCTS = frozenset({
    "matmul", "dot", "vdot", "inner", "tensordot", "einsum", "c_einsum", "multi_dot", "vecdot",
    "matvec", "vecmat", "mm", "bmm", "addmm", "gemm", "sgemm", "dgemm", "gemmEx", "sgemmEx",
    "gemv", "sgemv", "gemm_ex", "batched_gemm", "cublas", "cublasLt", "cutensor",
    "__matmul__", "__rmatmul__", "__imatmul__",
})
# Modules whose import gives a matrix product away.
LIBRARIES = ("torch", "jax", "jaxlib", "tensorflow", "scipy.linalg", "cupy.cublas",
             "cupy_backends.cuda.libs.cublas", "cupyx.cutensor", "cupy.cutensor",
             "cupy_backends.cuda.libs.cutensor", "sklearn")
RECORD = "forbidden.jsonl"  # the worker's log of trapped calls, in the job's output folder


def library(name: str) -> bool:
    """Is `name` one of LIBRARIES or a submodule of one?"""
    return any(name == lib or name.startswith(lib + ".") for lib in LIBRARIES)


@dataclass(frozen=True)
class Finding:
    what: str  # e.g. "numpy.matmul", "the @ operator", "import torch"
    file: str
    line: int

    def describe(self) -> str:
        return f"{self.what} ({self.file}, line {self.line})"


class ForbiddenCall(RuntimeError):
    """A library matrix product was called where the GEMM must be hand-written."""


NUMPY_TARGETS = ["matmul", "dot", "vdot", "inner", "tensordot", "einsum", "vecdot", "matvec",
                 "vecmat", "linalg.multi_dot", "linalg.matmul", "linalg.tensordot",
                 "linalg.vecdot",
                 "_core.multiarray.c_einsum"]  # einsum's engine, also numpy.lib.mixins.um's
CUPY_TARGETS = ["matmul", "dot", "vdot", "inner", "tensordot", "einsum", "linalg.multi_dot",
                "linalg.tensordot"]
TRAPPED_PACKAGES = ("numpy", "cupy", "cupyx", "cupy_backends")

# CPython's layout (3.8 to 3.13): PyTypeObject.tp_as_number, PyNumberMethods' matmul slots,
# the PyMethodDef behind a method descriptor and the function behind a slot wrapper.
_TP_AS_NUMBER = 12 * 8
_NB_MATMUL, _NB_IMATMUL = 34 * 8, 35 * 8
_SLOT_IDS = {_NB_MATMUL: 75, _NB_IMATMUL: 76}  # Py_nb_(inplace_)matrix_multiply
_DESCR_COMMON = 40  # PyObject_HEAD, d_type, d_name, d_qualname; then d_method or d_base
_METH_FASTCALL_KEYWORDS, _METH_VARARGS_KEYWORDS = 0x80 | 0x02, 0x01 | 0x02
_BINARY = ctypes.CFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.py_object)
_FASTCALL = ctypes.CFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.c_void_p,
                             ctypes.c_ssize_t, ctypes.c_void_p)
_VARARGS = ctypes.CFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.py_object,
                            ctypes.c_void_p)


def _writable(address: int) -> bool:
    """Is this address in a writable mapping of the process? (Writing a read-only one
    through ctypes would crash the worker.)"""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                span, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in span.split("-"))
                if lo <= address < hi:
                    return "w" in perms
    except OSError:
        pass
    return False


class Traps:
    """Library matrix products refused while armed; every attempt is recorded (in the
    file `record`, which the grader reads with read_hits)."""

    def __init__(self, record: Path | None, submission: Path | None):
        self.record, self.submission = record, submission
        self.armed = False
        self._patches: list[tuple[int, int, int]] = []  # (address, original, trap)
        self._keep: list = []  # ctypes callbacks must outlive their use
        self._lock = threading.Lock()
        self._index: dict = {}  # _bindings()
        self._index_key: tuple | None = None

    # recording -------------------------------------------------------------------------

    def _where(self) -> tuple[str, int]:
        frame = sys._getframe(2)
        while frame is not None:
            path = Path(frame.f_code.co_filename)
            if self.submission is not None and path.is_relative_to(self.submission):
                return path.name, frame.f_lineno
            frame = frame.f_back
        return "?", 0

    def hit(self, what: str) -> str:
        file, line = self._where()
        finding = Finding(what, file, line)
        with self._lock:
            if self.record is not None:
                try:
                    with open(self.record, "a") as f:
                        f.write(json.dumps(asdict(finding)) + "\n")
                except OSError:
                    pass
        return (f"{what} is not allowed here: this GEMM must be hand-written "
                f"({file}, line {line})")

    # installing ------------------------------------------------------------------------

    def install(self) -> None:
        """Wrap the entry points of NumPy and (where imported or importable) CuPy, put the
        import guard first on sys.meta_path and patch the array types; then arm."""
        import numpy

        self._wrap_package(numpy, "numpy", NUMPY_TARGETS)
        self._patch_type(numpy.ndarray, "numpy arrays")
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            for extra in ("cupy.cublas", "cupy_backends.cuda.libs.cublas"):
                try:
                    importlib.import_module(extra)
                except Exception:  # noqa: BLE001 - not there: nothing to wrap
                    pass
            self._wrap_package(cupy, "cupy", CUPY_TARGETS)
            self._wrap_cublas()
            self._patch_type(cupy.ndarray, "CuPy arrays")
        sys.meta_path.insert(0, ImportGuard(self))
        self._index, self._index_key = {}, None  # _bindings' ids hold only while installing
        self.arm()

    def _trap_function(self, name: str, original):
        traps = self

        @functools.wraps(original)
        def trapped(*args, **kwargs):
            if traps.armed:
                raise ForbiddenCall(traps.hit(name))
            return original(*args, **kwargs)

        del trapped.__wrapped__  # no signpost back to the original
        return trapped

    def _replace_everywhere(self, original, trap, packages: tuple[str, ...]) -> None:
        """Every module attribute of these packages bound to `original` (numpy.dot is also
        numpy._core.multiarray.dot, numpy._core.numeric.dot...) now holds the trap."""
        for mod, attr in self._bindings(packages).get(id(original), ()):
            if vars(mod).get(attr) is original:
                setattr(mod, attr, trap)

    def _bindings(self, packages: tuple[str, ...]) -> dict[int, list[tuple[types.ModuleType,
                                                                          str]]]:
        """{id(value): [(module, attribute)]} over the packages' loaded modules, built once
        per install: searching them all for each of the ~40 trapped functions took ~0.7 s
        of every GEMM job. Dropped at the end of install(): an id names its object only
        while the object lives (the `is original` test guards the rest)."""
        key = (packages, len(sys.modules))
        if self._index_key != key:
            index: dict[int, list] = {}
            for mod_name, mod in list(sys.modules.items()):
                if not isinstance(mod, types.ModuleType) or mod_name.split(".")[0] not in \
                        packages:
                    continue
                for attr, value in list(vars(mod).items()):
                    index.setdefault(id(value), []).append((mod, attr))
            self._index, self._index_key = index, key
        return self._index

    def _wrap_package(self, package, label: str, targets: list[str]) -> None:
        for target in targets:
            owner = package
            *path, name = target.split(".")
            for part in path:
                owner = getattr(owner, part, None)
            original = getattr(owner, name, None) if owner is not None else None
            if original is None or not callable(original):
                continue
            self._replace_everywhere(original, self._trap_function(f"{label}.{target}",
                                                                   original),
                                     TRAPPED_PACKAGES)

    def _wrap_cublas(self) -> None:
        """Every public function of cupy.cublas, and the GEMM and GEMV bindings of the
        cuBLAS library (functions defined there, not helpers imported from elsewhere)."""
        for mod_name in ("cupy.cublas", "cupy_backends.cuda.libs.cublas"):
            mod = sys.modules.get(mod_name)
            if mod is None:
                continue
            for attr, value in list(vars(mod).items()):
                if (callable(value) and not isinstance(value, type)
                        and getattr(value, "__module__", None) == mod_name
                        and not attr.startswith("_")
                        and (mod_name == "cupy.cublas" or "gem" in attr.lower())):
                    self._replace_everywhere(value, self._trap_function(
                        f"{mod_name}.{attr}", value), TRAPPED_PACKAGES)

    def _patch_type(self, cls: type, label: str) -> None:
        """Trap `a @ b`, `a @= b`, a.dot(b) and a.__matmul__(b) for arrays of cls."""
        try:
            get_slot = ctypes.pythonapi.PyType_GetSlot
            get_slot.restype, get_slot.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                   ctypes.c_int]
            numbers = ctypes.c_void_p.from_address(id(cls) + _TP_AS_NUMBER).value
        except (AttributeError, ValueError):
            return
        traps = self

        def binary(a, b):
            if traps.armed:
                traps.hit(f"the @ operator on {label}")
            return NotImplemented  # Python then raises TypeError: the product never happens

        slot_trap = _BINARY(binary)
        self._keep.append(slot_trap)
        slot_address = ctypes.cast(slot_trap, ctypes.c_void_p).value
        originals = {}
        for offset, slot_id in _SLOT_IDS.items():
            if not numbers:
                break
            current = get_slot(cls, slot_id)
            field = numbers + offset
            if current and ctypes.c_void_p.from_address(field).value == current and _writable(
                    field):
                self._patches.append((field, current, slot_address))
                originals[current] = slot_address
        for name in ("__matmul__", "__rmatmul__", "__imatmul__"):
            self._patch_wrapper(cls.__dict__.get(name), name, originals)
        self._patch_method(cls.__dict__.get("dot"), f"the dot() method of {label}")

    def _patch_wrapper(self, descr, name: str, originals: dict[int, int]) -> None:
        if type(descr) is not types.WrapperDescriptorType:
            return
        base = ctypes.c_void_p.from_address(id(descr) + _DESCR_COMMON).value
        field = id(descr) + _DESCR_COMMON + 8  # d_wrapped
        current = ctypes.c_void_p.from_address(field).value
        if (base and ctypes.c_char_p.from_address(base).value == name.encode()
                and current in originals and _writable(field)):
            self._patches.append((field, current, originals[current]))

    def _patch_method(self, descr, label: str) -> None:
        if type(descr) is not types.MethodDescriptorType:
            return
        method_def = ctypes.c_void_p.from_address(id(descr) + _DESCR_COMMON).value
        if not method_def or ctypes.c_char_p.from_address(method_def).value != b"dot":
            return
        flags = ctypes.c_int.from_address(method_def + 16).value
        traps = self

        def refuse(*_args):
            if traps.armed:
                traps.hit(label)
            return NotImplemented

        if flags == _METH_FASTCALL_KEYWORDS:
            trap = _FASTCALL(refuse)
        elif flags == _METH_VARARGS_KEYWORDS:
            trap = _VARARGS(refuse)
        else:
            return
        field = method_def + 8  # ml_meth
        if _writable(field):
            self._keep.append(trap)
            self._patches.append((field, ctypes.c_void_p.from_address(field).value,
                                  ctypes.cast(trap, ctypes.c_void_p).value))

    # arming ----------------------------------------------------------------------------

    def arm(self) -> None:
        for field, _, trap in self._patches:
            ctypes.c_void_p.from_address(field).value = trap
        self.armed = True

    def disarm(self) -> None:
        self.armed = False
        for field, original, _ in self._patches:
            ctypes.c_void_p.from_address(field).value = original

    @contextmanager
    def paused(self) -> Iterator[None]:
        """For the worker's own use of a library product (warming the GPU up)."""
        self.disarm()
        try:
            yield
        finally:
            self.arm()


# Libraries allowed to import one of LIBRARIES lazily during a student's call: numba
# compiling a kernel imports scipy.linalg where SciPy is installed, and that import gives
# the student nothing. The submission's own imports (and exec'd code) are still refused.
TRUSTED_IMPORTERS = ("numba", "numba_cuda", "llvmlite", "cupy", "cupy_backends", "cupyx")
_LIBRARY_ROOTS = tuple(sorted({name.split(".")[0] for name in LIBRARIES}))
_IMPORTLIB = Path(importlib.__file__).parent


def _importer_file() -> str:
    """The file of the code that asked for the import being resolved: the first frame
    outside the import machinery (importlib and its frozen bootstrap)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen importlib") or Path(name).parent == _IMPORTLIB):
            return name
        frame = frame.f_back
    return ""


def _trusted_importer(file: str) -> bool:
    """Inside a trusted library, or inside a library of LIBRARIES importing its own
    submodules (which a trusted library's import of it set off)."""
    path = Path(file)
    for package in (*TRUSTED_IMPORTERS, *_LIBRARY_ROOTS):
        module = sys.modules.get(package)
        where = getattr(module, "__file__", None)
        if where and path.is_relative_to(Path(where).parent):
            return True
    return False


class ImportGuard:
    """A meta-path finder that refuses the libraries of LIBRARIES while the traps are armed
    (modules already imported are caught by the wrappers instead), unless a trusted library
    asks for them (TRUSTED_IMPORTERS)."""

    def __init__(self, traps: Traps):
        self.traps = traps

    def find_spec(self, name: str, path=None, target=None):
        if self.traps.armed and library(name) and not _trusted_importer(_importer_file()):
            raise ForbiddenCall(self.traps.hit(f"import {name}"))
        return None
