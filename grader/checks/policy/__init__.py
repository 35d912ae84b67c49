"""What a graded module may contain: a static policy, checked on the source in the grader.

`check(folder, module, part)` reads `module`.py of a submission folder and the sibling
modules it imports (relative or absolute, transitively), parses them exactly as Python
would (bytes in, so a coding cookie means the same to both), and returns the places that
break a rule, each as a `Violation` with its file, line, the code and the rule. The grader
never runs submitted code here; a module that does not parse yields nothing (the worker
reports its SyntaxError). Code under a module-level `if __name__ == "__main__":` is not
run by the grader and is not checked (its `else:` is; `__name__` may not be rebound).

The rules, in short (RULES in rules.py has the sentence each violation carries):

- file: graded modules are regular files of at most 1 MiB; a sibling a module imports
  must not be shadowed by what Python would load first (a package folder, an extension
  module or a .pyc of the same name), nor be a link.
- import, star-import: an allow-list of modules (numpy, math, cmath, numba's cuda and
  types, nnkit.backend, mpi4py.MPI in Part 3, a few harmless stdlib helpers, the
  submission's own modules); never `import *`.
- builtin: eval, exec, compile, __import__, getattr, setattr, delattr, vars, globals,
  locals, open, input, breakpoint, help, memoryview, id, exit/quit, SystemExit,
  KeyboardInterrupt, operator.attrgetter/methodcaller, typing.get_type_hints, type()
  with three arguments, super() outside a method or with arguments other than (its
  class, self); also when used as values.
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
- mpi-comm, mpi-tally, mpi-collective (Part 3): only the communicator given, as given
  (no COMM_WORLD, Dup, Split, Create*, handles: a note in mpi_1_data_parallel.py, whose
  functions get the real communicator, grader/parts/mpi.py), never the counting
  communicator's tallies; in mpi_2_ring.py and whatever it uses from other modules,
  point-to-point calls only.

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

from pathlib import Path

from grader.checks.policy.checker import _Checker
from grader.checks.policy.rules import MAX_BYTES, PARTS, RULES, Violation, is_cheat  # noqa: F401


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
