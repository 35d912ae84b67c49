"""The rules: the sentence each violation carries, a violation, and which breaches fail an
item (the others are reported as notes).
"""

from __future__ import annotations

from dataclasses import dataclass

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
              "functools, itertools, operator, collections, enum, abc, warnings, time, "
              "copy (copy, deepcopy), types (SimpleNamespace) and the submission's own "
              "modules",
    "star-import": "`from ... import *` hides what a module takes: import the names you use",
    "builtin": "eval, exec, compile, __import__, getattr, setattr, delattr, vars, globals, "
               "locals, open, input, breakpoint, help, memoryview, id, exit, quit, "
               "SystemExit, KeyboardInterrupt, attrgetter, methodcaller, get_type_hints, "
               "copy's other names and deepcopy but as deepcopy(x), "
               "type() with 3 arguments, super() outside a method or with other "
               "arguments than (its class, self), and `match` class patterns on classes "
               "other than your own plain ones (no metaclass, library base or decorator "
               "but @dataclass) reach around the language; graded code has no use for "
               "them",
    "private": "underscore names and interpreter internals (__dict__, __class__, "
               "__globals__, __closure__, cell_contents, frames, code objects, mro) belong "
               "to other code; graded code may use underscore attributes only on self, "
               "cls or super() in its own classes, and on its own plain classes by name",
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
                "communicator classes (but in annotations and isinstance tests), Dup, "
                "Clone, Split, Create*, Spawn, Connect, Accept, handles (f2py, py2f, "
                "fromhandle) and error handlers are not allowed",
    "mpi-request": "in the ring, a request is completed by a wait or a test: "
                   "MPI.Request.Free (through the class) would leave an Isend's buffer in "
                   "MPI's hands with nothing to wait on",
    "mpi-abort": "comm.Abort ends every rank of the job, the grader's checks with them: "
                 "raise an exception instead (the rank's error is then reported)",
    "mpi-tally": "the kit's tallies of a communicator (calls, bytes_sent) are the grader's "
                 "to read, not graded code's",
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
# Which breaches fail an item

# Rules with no innocent reading in graded code, and whose harm the run-time layers may
# not see (a stride trick reading memory, a tally of the counting communicator reset, a
# private attribute of the kit): they fail the item. The other rules describe the style
# the assignment asks for (kernels numba compiles, numpy for set-up only, ...) and are
# reported as notes: the audit hook, the launch replay and the module photograph judge
# what the code does, so an unusual but honest submission keeps its points.
CHEAT_RULES = frozenset({"file", "builtin", "private", "memory", "module-assign", "mpi-comm",
                         "mpi-tally", "mpi-collective", "mpi-request"})
# Imports that fail the item: ways around the language, the kit's and grader's internals,
# and libraries that compute what the student must write.
CHEAT_IMPORTS = frozenset({
    "ctypes", "_ctypes", "cffi", "gc", "inspect", "importlib", "builtins", "mmap",
    "pickle", "marshal", "code", "codeop", "runpy", "grader", "nnkit", "torch", "jax",
    "jaxlib", "tensorflow", "scipy", "sklearn", "cupy", "cupyx", "cupy_backends",
    "subprocess", "socket", "multiprocessing", "pty", "_thread", "_posixsubprocess",
    "weakref", "_weakref", "atexit",
    # Objects looked up by a dotted string, past every attribute rule: pydoc.locate,
    # pkgutil.resolve_name, string.Formatter().get_field("0.__array_interface__", ...).
    "pydoc", "pkgutil", "string",
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
