"""The worker's audit hook and the standard library a correct submission may use: a
@dataclass, a NamedTuple (under `from __future__ import annotations` too) and NumPy data
unpickled by mpi4py's lowercase calls act through compile, exec, id() and
pickle.find_class, which the hook otherwise refuses, and so does printing an array or a
dataclass, and copy.deepcopy (whose memo the policy keeps from graded code). These
pass; pprint's id(), which a subclass can read, a pickle naming any other
function, a string compiled by the submission itself and an annotation with a call in it
are still refused. Run in a fresh interpreter: an audit hook cannot be removed."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from tests.conftest import KIT_ROOT

STUDENT = '''\
from __future__ import annotations

import collections
import typing
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Geometry:
    block: tuple
    grid: tuple = (1, 1)


class Layer(NamedTuple):
    W: object
    b: object


Pair = collections.namedtuple("Pair", "left right")


def receive(loads, blobs):
    return [loads(blob) for blob in blobs]


def compiled_here():
    return eval("1 + 1")


def annotation_with_a_call():
    return typing.ForwardRef("len('ab')")


def debug_prints():
    import numpy
    return repr(numpy.arange(3.0)) + repr(Geometry((32, 8)))


def deep_copies():
    import copy

    import numpy
    return copy.deepcopy([numpy.ones(3), {"W": [numpy.zeros(2)]}, Geometry((1, 1))])


def addresses_from_pprint():
    import pprint

    class Peek(pprint.PrettyPrinter):
        def format(self, obj, context, maxlevels, level):
            seen.extend(context)
            return super().format(obj, context, maxlevels, level)

    seen = []
    Peek().pformat([[1], [2]])
    return seen
'''

DRIVER = '''\
import json, pickle, sys
from pathlib import Path
import numpy as np
import collections, dataclasses, inspect, typing  # loaded before arming, as in the worker
from grader.worker import guard
from grader.worker.common import read_roots

folder = Path(sys.argv[1])
record = folder.parent / "guard.jsonl"
hook = guard.Guard(folder, [], record, read_roots=[folder, *read_roots()])
hook.log_only = True
hook.arm()
sys.path.insert(0, str(folder))
import student

assert student.Geometry((32, 8)).grid == (1, 1) and student.Layer(1, 2).b == 2
blobs = [bytes.fromhex(h) for h in json.loads(sys.argv[2])]
print("numpy:", len(student.receive(pickle.loads, blobs)), flush=True)
print("printed:", len(student.debug_prints()), flush=True)
print("copied:", len(student.deep_copies()), flush=True)
print("stage", flush=True)
student.receive(pickle.loads, [pickle.dumps(len)])
student.compiled_here()
student.annotation_with_a_call()
student.addresses_from_pprint()
'''


ARMED = '''\
import sys
{before}
from pathlib import Path
from grader.worker import guard
from grader.worker.common import read_roots
folder = Path(sys.argv[1])
hook = guard.Guard(folder, [], folder.parent / "guard.jsonl",
                   read_roots=[folder, *read_roots()])
hook.log_only = {log_only}
hook.arm()
sys.path.insert(0, str(folder))
'''


def _run_armed(tmp_path: Path, module: str, source: str, then: str, log_only: bool = True,
               before: str = "") -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run `then` in a fresh interpreter after arming a guard over a folder holding
    `module`.py; (the run, the guard's records)."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / f"{module}.py").write_text(source)
    driver = ARMED.format(log_only=log_only, before=before) + textwrap.dedent(then)
    result = subprocess.run([sys.executable, "-c", driver, str(folder)], cwd=KIT_ROOT,
                            capture_output=True, text=True, timeout=120)
    guard_file = tmp_path / "guard.jsonl"
    lines = guard_file.read_text().splitlines() if guard_file.exists() else []
    return result, [json.loads(line) for line in lines]


def _refusals(tmp_path) -> tuple[list[dict], str]:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "student.py").write_text(STUDENT)
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(6).reshape(2, 3).T,
              np.int64(800), np.float32(0.5), np.zeros(0, np.float32), np.dtype("int64"),
              (np.array([3, 7]), [np.ones(2)])]
    blobs = [pickle.dumps(a, protocol=5).hex() for a in arrays]
    # One interpreter, two stages: the refusals before "stage" come from correct code.
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER), str(folder),
                             json.dumps(blobs)], cwd=KIT_ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (tmp_path / "guard.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return records, result.stdout


def test_stdlib_class_builders_and_numpy_pickles_pass_and_the_rest_is_refused(tmp_path):
    records, stdout = _refusals(tmp_path)
    assert "numpy: 7" in stdout
    events = [(r["event"], r["line"]) for r in records]
    # Correct code (class definitions at import, the NumPy pickles): nothing refused. Then
    # the pickle naming builtins.len (line 24), the submission's own eval (28) and the
    # annotation that calls (32), each refused.
    assert events[:4] == [("pickle.find_class", 24), ("compile", 28), ("exec", 28),
                          ("compile", 32)], records
    # Printing an array or a dataclass calls id() inside NumPy and reprlib: not refused
    # (nothing before "stage" is). pprint hands its id()-keyed context to a subclass's
    # format(), so its id() is the submission's (lines 53 and 56): addresses stay refused.
    assert "printed:" in stdout and "copied: 3" in stdout  # deepcopy's id()s: innocent
    assert events[4:] and set(events[4:]) <= {("builtins.id", 53), ("builtins.id", 56)}


FORGER = '''\
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class Forged(str):
    """A file name that says it lies in no submission and hashes as another file."""

    def __hash__(self):
        return str.__hash__(os.path.join(HERE, "other.py"))

    def __eq__(self, other):
        return str.__eq__(os.path.join(HERE, "other.py"), other)

    def startswith(self, prefix, *args):
        return prefix != HERE + os.sep


def forge():
    code = compile("import sys\\nsys._getframe()\\n", Forged(os.path.join(HERE, "x.py")), "exec")
    exec(code, {})
'''


def test_a_file_name_of_a_str_subclass_is_the_submissions(tmp_path):
    """The guard decides whose a frame is by its file name and remembers the answer: a
    str subclass whose startswith, hash and == lie would pass for the kit's file, and
    make the guard remember a real submission file as the kit's. Its compile is refused,
    and a frame of such a name counts as the submission's."""
    result, records = _run_armed(tmp_path, "forger", FORGER, """\
        import forger
        forger.forge()
        """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [r["event"] for r in records][:2] == ["compile", "exec"], records
    assert ("sys._getframe", "code of a forged file name") in [
        (r["event"], r["file"]) for r in records], records


def test_a_library_reached_through_a_link_is_judged_where_it_really_is(tmp_path):
    """A venv that links to another checkout's (`ln -s ../main/.venv .venv`): the worker's
    library roots are real paths, the modules' files the linked ones. Such a library is a
    library; a file of the scratch folder or elsewhere stays the submission's."""
    from grader.worker.guard import Guard

    real = tmp_path / "main" / "site-packages"
    (real / "numba").mkdir(parents=True)
    (real / "numba" / "kernelapi.py").write_text("")
    (tmp_path / "clone").mkdir()
    (tmp_path / "clone" / "venv").symlink_to(real)
    submission, scratch = tmp_path / "sub", tmp_path / "scratch"
    submission.mkdir()
    scratch.mkdir()
    (scratch / "lib").symlink_to(submission)
    guard = Guard(submission, [], tmp_path / "guard.jsonl", scratch=[scratch],
                  read_roots=[real])
    assert guard._kind(str(tmp_path / "clone" / "venv" / "numba" / "kernelapi.py")) == ""
    assert guard._kind(str(real / "numba" / "kernelapi.py")) == ""
    assert guard._kind(str(scratch / "mine.py")) == "submission"
    assert guard._kind(str(scratch / "lib" / "gemm_1_naive.py")) == "submission"
    assert guard._kind(str(tmp_path / "elsewhere.py")) == "submission"


def test_logging_works_and_hands_no_frame_back(tmp_path):
    """logging is innocent (it looks at frames to name the line that logged), but its
    currentframe() returned the caller's frame to whoever called it, and a frame's f_back
    and f_locals are not audited: from there every local of the kit's stack was the
    submission's (red team). Armed, it returns None; logging still logs. The guard names
    logging's file innocent even when no module had loaded logging before it was made."""
    source = textwrap.dedent('''\
        import logging

        def log_and_peek():
            logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
            logging.getLogger("student").info("launching %d blocks", 8)
            return logging.currentframe()
        ''')
    result, records = _run_armed(tmp_path, "student", source, """\
        import student
        print("frame:", student.log_and_peek(), flush=True)
        """, log_only=False, before='assert "logging" not in sys.modules')
    assert result.returncode == 0, result.stderr[-2000:]
    assert "frame: None" in result.stdout
    assert "INFO launching 8 blocks" in result.stderr
    assert records == []


def test_the_processs_memory_is_closed_and_its_status_open(tmp_path):
    """/proc/self/mem held every object of the kit's (red team: a replay's inputs read back
    through io.FileIO); the process's status, which libraries read, stays open."""
    source = textwrap.dedent('''\
        import io
        import os

        def status():
            with io.FileIO("/proc/self/status", "r") as opened:
                return len(opened.read())

        def memory():
            with io.FileIO(f"/proc/{os.getpid()}/task/{os.getpid()}/mem", "r") as opened:
                return opened

        def environment():
            with io.FileIO("/proc/self/environ", "r") as opened:
                return opened.read()
        ''')
    result, records = _run_armed(tmp_path, "student", source, """\
        import student
        print("status:", student.status() > 0, flush=True)
        print("stage", flush=True)
        student.memory()
        student.environment()
        """)
    assert "status: True" in result.stdout, result.stderr[-1500:]
    assert [(r["event"], r["line"]) for r in records] == [("open", 9), ("open", 13)], records
