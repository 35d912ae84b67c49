"""The worker's audit hook (PEP 578): what submitted code may not do, however it is written.

(A module over 400 lines: its rules and the stack walk that decides who acts are read
together, each rule an exception to the walk's answer; apart, one would be read without
the other.)

The submission runs in the worker's own process, so anything written in Python to stop it
(a trap, a wrapper) it could undo. An audit hook it cannot: once added, no Python code can
remove or bypass it, and the interpreter calls it for every sensitive operation (ctypes,
`gc` walks, frame access, opening files, starting processes, imports, ...). The hook
decides who acts by walking the Python stack from the operation outward:

- a frame of the submission comes first: the submission acts, and the operation is
  refused (see DENIED), whatever library it went through (numpy.ctypeslib, a thread or a
  map() over a library function started from its code); code from a file of neither
  the kit nor an installed library (a module the submission wrote and imported) is the
  submission's;
- a frame of the kit (the staged grader/worker and nnkit) or of a compiler library the
  kit drives (numba, llvmlite, CuPy, CUDA's bindings) comes first: they act for the kit,
  for instance numba compiling and launching a kernel for the recorder, and it is allowed;
- otherwise (no submission frame at all) it is allowed.

A refusal is recorded (one JSON line in the job's guard file, through a descriptor
opened before the submission was imported) and ends the worker at once with status
GUARD_STATUS: the grader fails every item of the job with the operation and the line of
the submission that asked for it. The submission cannot turn a refusal into a pass; at
most it can make its own job fail.

What the hook cannot see: pure-Python mutation of module globals and object attributes
(not audited events) and work that does not pass through an audited operation. Those are
covered elsewhere: the kit keeps private references to what it relies on and checks that
trusted modules are unchanged before writing results (grader/worker/tamper.py), and
results count only when the kit's replay of the submission's own kernels reproduces them
(grader/worker/launches.py).
"""

from __future__ import annotations

import abc  # noqa: F401 - loaded before the guard names its files (INNOCENT, ID_INNOCENT)
import collections  # noqa: F401
import contextlib  # noqa: F401
import copy  # noqa: F401
import dataclasses  # noqa: F401
import enum  # noqa: F401
import functools  # noqa: F401
import json
import logging
import os
import reprlib  # noqa: F401
import sys
import threading
import typing  # noqa: F401
import warnings  # noqa: F401
import weakref  # noqa: F401 - loads _weakrefset
from collections.abc import Iterable
from pathlib import Path

GUARD_FILE = "guard.jsonl"
GUARD_STATUS = 86  # the worker's exit status after a refusal

# Libraries that act for the kit when they run between a submission frame and the
# operation: numba compiles and launches kernels (and calls LLVM through ctypes), CuPy and
# CUDA's Python bindings move device memory. numpy is not among them: numpy.ctypeslib
# would otherwise hand raw memory to a submission.
COMPILERS = ("numba", "numba_cuda", "llvmlite", "cupy", "cupy_backends", "cupyx", "cuda",
             "fastrlock", "mpi4py")

# Operations refused when the submission acts (exact names, then prefixes).
DENIED = frozenset({
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.freeze",
    "sys._getframe", "sys._getframemodulename", "sys._current_frames",
    "sys._current_exceptions", "sys.settrace", "sys.setprofile", "sys.addaudithook",
    "sys.monitoring.register_callback", "sys.set_asyncgen_hooks",
    "builtins.id", "code.__new__", "marshal.loads", "marshal.load", "marshal.dumps",
    "pickle.find_class", "mmap.__new__", "resource.setrlimit", "resource.prlimit",
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "os.kill", "os.killpg", "signal.pthread_kill", "pty.spawn",
    "_thread.start_new_thread", "os.putenv", "os.unsetenv", "os.chmod", "os.chown",
    "os.link", "os.symlink", "os.truncate", "os.setxattr", "os.removexattr",
    "cpython.run_command", "cpython.run_file", "cpython.run_module", "cpython.run_startup",
    "ctypes.dlopen", "import",
})
DENIED_PREFIXES = ("ctypes.", "socket.", "msvcrt.", "winreg.", "_winapi.", "sys.monitoring")
# Refused whoever seems to act, once armed: nothing the kit does after set-up needs them,
# and a submission can have the interpreter call a builtin for it with no frame of its own
# on the stack (a weakref finalizer or a dunder bound with functools.partial, run when a
# kit frame drops the object), which the walk would take for the kit.
ALWAYS_DENIED = frozenset({
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "sys.settrace", "sys.setprofile", "sys.addaudithook", "sys._current_frames",
    "sys._current_exceptions", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})
# Path operations: allowed inside the submission's folder and the job's scratch only.
PATH_EVENTS = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree",
                         "shutil.move", "shutil.copyfile", "shutil.copytree", "os.listdir",
                         "os.scandir", "os.utime", "glob.glob"})
# Path operations with a destination too (os.replace raises os.rename): both ends must be
# the submission's, or a file written in its folder could be moved into the output folder.
TWO_PATH_EVENTS = frozenset({"os.rename", "shutil.move", "shutil.copyfile", "shutil.copytree"})
# Attributes whose reading hands out a frame, and from it every local of the kit.
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back",
                              "gi_suspended", "cr_suspended"})
# Operations whose frame must name them: the frame that runs when the operation happens
# names the function it calls (`open`, `sys._getframe`, `exec`, `tb.tb_frame`) somewhere
# in its code, however it is written. One that does not came through a call made by the
# interpreter (a finalizer or a partial-bound dunder run as a kit frame dropped an object,
# map() consumed there): refused, whoever the walk finds, since such a chain reads the
# kit's frames and files, or runs a string, with only kit frames on the stack. A word here
# is looked for in the names and locals of the frame's code (`_open`, `opener`, `getframe
# = sys._getframe`); exec() of a string raises compile too.
# Compiled libraries have no frames (CuPy reads its headers from Cython code): an open
# that is not named may still read what the submission may (_may_open).
NAMED_EVENTS = {"open": ("open",), "sys._getframe": ("getframe",),
                "sys._getframemodulename": ("getframe",),
                "compile": ("compile", "exec", "eval"), "exec": ("exec", "eval"),
                # path operations (os.replace raises os.rename, os.unlink os.remove)
                "os.remove": ("remove", "unlink"), "os.rename": ("rename", "replace"),
                "os.rmdir": ("rmdir",), "os.mkdir": ("mkdir",), "os.listdir": ("listdir",),
                "os.scandir": ("scandir",), "os.utime": ("utime",),
                "shutil.rmtree": ("rmtree",), "shutil.move": ("move",),
                "shutil.copyfile": ("copy",), "shutil.copytree": ("copytree",),
                "glob.glob": ("glob",)}
# Events raised in Python by the function that performs them: the frame to judge is the
# first one outside that module, its caller.
SELF_RAISED = {"shutil.rmtree": "shutil", "shutil.move": "shutil",
               "shutil.copyfile": "shutil", "shutil.copytree": "shutil", "glob.glob": "glob"}
# ctypes calls with no frame of the submission: the first frame outside the ctypes package
# must be a compiler's (numba, CuPy, ... drive ctypes through wrappers of their own) or
# name ctypes (the kit's traps and replay, numpy.ctypeslib); a finalizer or a bound dunder
# calling a ctypes function runs under a frame that does not.
CTYPES_WORDS = ("ctypes", "ctypeslib")
# Threads whose work is the kit's: the CUDA simulator's (one per simulated CUDA thread).
TRUSTED_THREADS = ("numba",)
# Standard-library modules that look at the caller's frame or set attributes of the
# classes they build, on the caller's behalf, and hand nothing of it back
# (collections.namedtuple, typing, enum, dataclasses, warnings): their own use of those
# operations is not the submission's. All are imported above, so that they are innocent
# whatever a job had loaded when its guard was made. logging's currentframe() did hand the
# caller's frame back: Guard.arm replaces it (see _no_frame).
INNOCENT = ("collections", "typing", "enum", "dataclasses", "warnings", "functools", "abc",
            "contextlib", "logging", "_weakrefset")
INNOCENT_EVENTS = frozenset({"sys._getframe", "sys._getframemodulename", "object.__setattr__",
                             "object.__delattr__"})
# Standard-library modules that write the methods of the classes they build as source text
# and compile it (a @dataclass's __init__, __repr__, __eq__; collections.namedtuple's
# __new__): the text is built from the class's field names, which the submission's own
# source spells out, not from a string it passes. Their compile and exec are allowed when
# the call comes from their own code; every other compile of a string is refused.
CODEGEN = ("dataclasses", "collections")
CODEGEN_EVENTS = frozenset({"compile", "exec"})
# typing compiles a string annotation into a ForwardRef (a NamedTuple's fields under
# `from __future__ import annotations`, say): allowed for a source without a call in it
# (names, dots, subscripts, `|`), never run from there (its exec stays refused).
FORWARD_REF = ("typing",)
# The ring's communicator finds the call it serves on the stack of another thread when a
# thread of the submission's sends (nnkit.collectives._tally, which answers only the
# communicator's own methods); every other caller of sys._current_frames stays refused.
FRAMES_INNOCENT = ("nnkit.collectives",)
# A @dataclass without a docstring gets one from inspect.signature, whose unwrap() keys a
# memo by id(): the number stays inside inspect; json's pure-Python encoder (json.dump to a
# file) marks the containers it is in by id() to find cycles. Printing calls id() too, in
# sets its callers never see: NumPy's array printing (a recursion guard), reprlib's and
# dataclasses' recursive_repr (a student's debugging print of an array lost whole jobs to
# that: red team, round four). Only id() is allowed there (inspect's currentframe and the
# like stay refused). copy.deepcopy's memo is keyed by id(): the policy allows only
# deepcopy(x), with no memo passed, and no __deepcopy__ method to be handed one. Not
# pprint, which hands its id()-keyed context to a subclass's format().
ID_INNOCENT = ("inspect", "json.encoder", "numpy._core.arrayprint", "numpy.core.arrayprint",
               "reprlib", "dataclasses", "copy")
# What the import system itself does to load a module a submission imports for the first
# time (listing the folders of sys.path and of a package to find it, reading its cached
# bytecode, compiling and running its file); the import itself is judged by the "import"
# event, the files it opens by "open", and what the module does by the frames it runs in.
# (The listings stay in the import system's cache: `import unittest` or
# `from mpi4py.util import dtlib` stopped whole jobs as "listed a folder outside its own".)
IMPORT_SYSTEM_EVENTS = frozenset({"marshal.loads", "marshal.load", "exec", "compile",
                                  "os.listdir", "os.scandir"})
# What unpickling may look up when a submission receives NumPy data through mpi4py's
# lowercase (pickled) calls, which the handout offers (comm.bcast, comm.scatter, ...): the
# functions NumPy's own pickles name to rebuild an array, a scalar or a dtype from bytes.
# They build data and run nothing; any other name a pickle asks for stays refused (a
# pickle can call any function it names, which the static policy never sees).
NUMPY_PICKLE_NAMES = frozenset(
    (module, name)
    for core in ("numpy._core", "numpy.core")
    for module, name in ((f"{core}.numeric", "_frombuffer"),
                         (f"{core}.multiarray", "_reconstruct"),
                         (f"{core}.multiarray", "scalar"))
) | {("numpy", "dtype"), ("numpy", "ndarray")}
# Files of the process's own /proc folder (and its threads') that a submission may not
# read: its memory, and where each page of it lies, hold every object of the kit's (red
# team: the inputs of a replay, read back through /proc/self/mem); its environment holds
# the job's settings. Libraries read the others (status, maps, cgroup, ...).
PROC_SECRETS = frozenset({"mem", "pagemap", "environ", "syscall", "stack"})
# Modules a submission may not load at run time (the static policy refuses more).
REFUSED_IMPORTS = ("ctypes", "_ctypes", "cffi", "gc", "inspect", "subprocess", "socket",
                   "multiprocessing", "pty", "torch", "jax", "jaxlib", "tensorflow", "scipy",
                   "sklearn", "cupy.cublas", "cupyx.cutensor", "grader", "nnkit.network",
                   "nnkit.collectives", "nnkit.plain_collectives", "nnkit.mpi_train",
                   "nnkit.model_parallel", "nnkit.device_reduce", "nnkit.device_parallel",
                   "importlib.util", "runpy",
                   "code", "codeop", "pickle", "marshal", "shelve", "mmap", "_posixsubprocess")


def _annotation(args: tuple) -> bool:
    """Is this compile's source an annotation that calls nothing?"""
    source = args[0] if args else None
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    return isinstance(source, str) and "(" not in source


class Guard:
    """The audit hook of one worker. `arm()` adds it; nothing removes it."""

    def __init__(self, submission: Path, kit_roots: Iterable[Path], record: Path,
                 scratch: Iterable[Path] = (), read_roots: Iterable[Path] = ()):
        self.submission = str(Path(submission).resolve())
        self.package = ""  # the private package its modules load under (nnkit.submission)
        self.kit = tuple(str(Path(p).resolve()) for p in kit_roots)
        self.scratch = tuple(str(Path(p).resolve()) for p in scratch)
        # Library and data folders a submission may read (imports of its own modules,
        # libraries' data files, MNIST); everything else is closed to it.
        self.read_roots = tuple(str(Path(p).resolve()) for p in read_roots)
        self.compilers = self._compiler_roots()
        self.innocent = self._innocent_files(INNOCENT)
        self.codegen = self._innocent_files(CODEGEN)
        self.id_innocent = self._innocent_files(ID_INNOCENT)
        self.frames_innocent = self._innocent_files(FRAMES_INNOCENT)
        self.forward_ref = self._innocent_files(FORWARD_REF)
        self._fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                           0o600)
        self._local, self._kinds = threading.local(), {}  # _kinds: file -> _kind(file)
        self._armed = False
        self.log_only = False  # for tests of the guard itself: record, do not stop

    @staticmethod
    def _compiler_roots() -> tuple[str, ...]:
        roots = []
        for name in COMPILERS:
            module = sys.modules.get(name)
            where = getattr(module, "__file__", None)
            paths = getattr(module, "__path__", None) or ([os.path.dirname(where)] if where
                                                           else [])
            roots += [str(Path(p).resolve()) for p in paths]
        return tuple(roots)

    @staticmethod
    def _innocent_files(names: tuple[str, ...]) -> frozenset[str]:
        files = set()
        for name in names:
            where = getattr(sys.modules.get(name), "__file__", None)
            if where:
                files.add(where)
                files.add(str(Path(where).resolve()))
        return frozenset(files)

    def arm(self, package: str = "") -> None:
        """From now on, refuse what the submission may not do (call once, after set-up)."""
        self.package = package
        logging.currentframe = _no_frame
        self._armed = True
        sys.addaudithook(self._hook)

    # who acts ------------------------------------------------------------------------

    def _inside(self, path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r + os.sep) for r in roots)

    def _actor(self) -> tuple[str, str, int]:
        """('submission' | 'kit' | '', file, line) of the frame nearest the operation."""
        frame = sys._getframe(2)
        kinds = self._kinds
        while frame is not None:
            name = frame.f_code.co_filename
            if type(name) is not str:  # a str subclass could lie in startswith and ==
                return "submission", "code of a forged file name", frame.f_lineno
            kind = kinds.get(name)
            if kind is None:
                kind = kinds[name] = self._kind(name)
            if kind == "submission":
                return kind, os.path.basename(name), frame.f_lineno
            if kind == "kit":
                return kind, name, frame.f_lineno
            frame = frame.f_back
        # No frame of either: a thread the submission started (a library function as its
        # target leaves no frame of the submission on the stack) acts for the submission.
        # Threads of the kit are the main thread and the simulator's CUDA threads.
        thread = threading.current_thread()
        if thread is not threading.main_thread() and not type(thread).__module__.startswith(
                TRUSTED_THREADS):
            return "submission", f"a thread it started ({thread.name})", 0
        return "", "", 0

    def _kind(self, name: str) -> str:
        """Whose file `name` is: 'submission', 'kit' (or a compiler's), '' (a library's,
        or code made from a string, "<...>", whose compile the hook judged); any other
        file (the scratch folder, /tmp) the submission's. Kept in `_kinds` (numba compiles
        with ~15,000 id() a kernel: 0.5-1 s a GPU job)."""
        if name.startswith(self.submission + os.sep):
            return "submission"
        if self._inside(name, (*self.kit, *self.compilers)):
            return "kit"
        if name.startswith("<") or (self._inside(name, self.read_roots)
                                    and not self._inside(name, self.scratch)):
            return ""
        # A library imported through a link (a venv that links to another checkout's):
        # judged by where its file really is. What a link leads to runs the code there.
        real = os.path.realpath(name)
        return self._kind(real) if real != name else "submission"

    # the hook ------------------------------------------------------------------------

    def _hook(self, event: str, args: tuple) -> None:
        if event == "object.__getattr__" and args[1:2] and args[1] not in FRAME_ATTRIBUTES:
            return  # the commonest event by far (every frame.f_code the walk reads)
        if not self._armed or not self._watched(event, args):
            return
        if getattr(self._local, "busy", False):
            return  # the hook's own operations (sys._getframe) are not judged
        self._local.busy = True
        try:
            running = sys._getframe(1)  # the frame running as the event happened
            if not _named(event, args, _judged_frame(event, running).f_code):
                # CuPy's compiled (Cython) code opens its headers with no frame of its own:
                # a nameless open or path operation may do what the submission's own may.
                if (event not in PATH_EVENTS and event != "open") or self._refused(event, args):
                    self._refuse(event, args, *_origin())
                return
            caller = running.f_code.co_filename
            if event in INNOCENT_EVENTS and caller in self.innocent:
                return
            if event in CODEGEN_EVENTS and caller in self.codegen:
                return
            if event == "builtins.id" and caller in self.id_innocent:
                return
            if event == "sys._current_frames" and caller in self.frames_innocent:
                return
            if event == "compile" and caller in self.forward_ref and _annotation(args):
                return
            if event in IMPORT_SYSTEM_EVENTS and caller.startswith("<frozen importlib"):
                return  # the import system loading a module's cached bytecode
            actor, file, line = self._actor()
            if event in ALWAYS_DENIED or event.startswith("socket."):
                self._refuse(event, args, *((file, line) if actor == "submission"
                                            else _origin()))
            elif actor == "submission" and self._refused(event, args):
                self._refuse(event, args, file, line)
            elif event.startswith("ctypes.") and not self._ctypes_named(running):
                self._refuse(event, args, *_origin())
            elif (event == "pickle.find_class" and actor == "kit"
                  and self._inside(file, self.kit) and tuple(args[:2]) not in NUMPY_PICKLE_NAMES):
                # A pickle the kit's communicator unpickles for the submission (mpi4py's
                # lowercase calls, in compiled code) is the submission's: it could name
                # any function, the kit's own included, and have it called.
                self._refuse(event, args, file, line)
        finally:
            self._local.busy = False

    def _ctypes_named(self, frame: object) -> bool:
        """Is the first frame outside the ctypes package, from `frame` out, a compiler's,
        or one whose code names ctypes (see CTYPES_WORDS)?"""
        while frame is not None and os.sep + "ctypes" + os.sep in frame.f_code.co_filename:
            frame = frame.f_back
        return frame is None or self._inside(frame.f_code.co_filename, self.compilers) or (
            _names_any(frame.f_code, CTYPES_WORDS))

    def _watched(self, event: str, args: tuple) -> bool:
        if event in DENIED or event in PATH_EVENTS or event.startswith(DENIED_PREFIXES):
            return True
        if event == "object.__getattr__":
            return len(args) > 1 and args[1] in FRAME_ATTRIBUTES
        return event in ("open", "object.__setattr__", "object.__delattr__", "exec",
                         "compile", "import")

    def _refused(self, event: str, args: tuple) -> bool:
        if event == "import":
            name = str(args[0]) if args else ""
            if self.package and name.startswith(self.package + "."):
                return False  # the submission's own modules
            return any(name == m or name.startswith(m + ".") for m in REFUSED_IMPORTS)
        if event == "open":
            return not self._may_open(args)
        if event == "pickle.find_class":
            return tuple(args[:2]) not in NUMPY_PICKLE_NAMES
        if event in PATH_EVENTS:
            paths = args[:2] if event in TWO_PATH_EVENTS else args[:1]
            return not paths or not all(isinstance(path, str | bytes | os.PathLike)
                                        and self._own_path(os.fsdecode(path))
                                        for path in paths)
        if event in ("object.__setattr__", "object.__delattr__"):
            owner = getattr(args[0], "__module__", None) if args else None
            return not (isinstance(owner, str) and self.package
                        and (owner == self.package or owner.startswith(self.package + ".")))
        if event == "compile":
            # An import compiles a real file (the submission's, a library's, the kit's).
            filename = args[1] if len(args) > 1 else None
            if isinstance(filename, bytes):
                filename = os.fsdecode(filename)
            return not (type(filename) is str and (
                filename.startswith(self.submission) or (
                    os.path.isfile(filename) and self._inside(
                        os.path.realpath(filename), (*self.read_roots, *self.kit)))))
        if event == "exec":
            code = args[0] if args else None
            filename = getattr(code, "co_filename", "")
            return not (type(filename) is str and filename.startswith(self.submission))
        return True

    def _own_path(self, path: str) -> bool:
        full = os.path.realpath(path)
        return self._inside(full, (self.submission, *self.scratch))

    def _may_open(self, args: tuple) -> bool:
        path, mode, flags = (list(args) + [None, None, None])[:3]
        if isinstance(path, int):
            return True  # an open descriptor: the submission's own
        if not isinstance(path, str | bytes | os.PathLike):
            return False
        full = os.path.realpath(os.fsdecode(path))
        if self._inside(full, (self.submission, *self.scratch)):
            return True
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if writing:
            return full in ("/dev/null",)
        if full in ("/dev/null", "/dev/urandom", "/dev/random"):
            return True
        if full.startswith(("/proc/self/", f"/proc/{os.getpid()}/")):
            return os.path.basename(full) not in PROC_SECRETS
        return self._inside(full, self.read_roots)

    def _refuse(self, event: str, args: tuple, file: str, line: int) -> None:
        detail = _short(args)
        record = {"event": event, "detail": detail, "file": file, "line": line}
        try:
            os.write(self._fd, (json.dumps(record) + "\n").encode())
        except OSError:
            pass
        if self.log_only:
            return
        os._exit(GUARD_STATUS)


def _named(event: str, args: tuple, code: object) -> bool:
    """Does `code` (the frame running as `event` happens) name the operation? True for
    the events that need not (see NAMED_EVENTS)."""
    if event == "object.__getattr__":  # a frame attribute: its name, exactly
        return len(args) > 1 and args[1] in code.co_names
    words = NAMED_EVENTS.get(event)
    if words is None or (event in IMPORT_SYSTEM_EVENTS
                         and code.co_filename.startswith("<frozen importlib")):
        return True  # the import system runs a module's code through a helper of its own
    return _names_any(code, words)


def _no_frame() -> None:
    """logging.currentframe while the guard is armed. The original returns its caller's
    frame to whoever calls it, and a frame's f_back and f_locals raise no audit event: one
    frame reached every local of the kit's stack (red team: a GEMM forged its replay's
    operands, a ring its tally). Without a frame, a log record names "(unknown file)",
    logging's own fallback, and logging works on."""
    return None


def _names_any(code: object, words: tuple[str, ...]) -> bool:
    """Does a name or local of `code` hold one of `words`?"""
    return any(word in name for word in words for name in (*code.co_names, *code.co_varnames))


def _judged_frame(event: str, frame: object) -> object:
    """The frame whose code must name `event`: `frame`, the one running as it happened,
    or for an event raised by the function that performs it (SELF_RAISED), that
    function's caller."""
    module = SELF_RAISED.get(event)
    if module is not None:
        name = os.sep + module + ".py"
        while frame.f_back is not None and frame.f_code.co_filename.endswith(name):
            frame = frame.f_back
    return frame


def _origin() -> tuple[str, int]:
    """A refused operation with no frame of the submission: the innermost frame, as a
    hint of where the interpreter called it from."""
    frame = sys._getframe(2)  # past this function and the hook
    return f"called from {os.path.basename(frame.f_code.co_filename)}", frame.f_lineno


def _short(args: tuple) -> str:
    parts = []
    for value in args[:3]:
        if isinstance(value, str | bytes | int | float):
            text = repr(value)
        else:
            text = f"<{type(value).__name__}>"
        parts.append(text[:80])
    return ", ".join(parts)
