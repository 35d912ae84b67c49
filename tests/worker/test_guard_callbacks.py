"""The audit hook and code the interpreter runs for the submission with no frame of the
submission's own on the stack: a builtin registered as a weakref finalizer or bound into
a dunder with functools.partial runs when a kit frame drops the object, and a module the
submission wrote outside its folder runs in frames of a file that is neither the kit's
nor a library's; and builtins the interpreter maps there (open, sys._getframe, exec,
ctypes, os.replace) whose results the submission keeps. Each is refused; json.dump to a
file of its own is not. Run in a fresh interpreter (a hook cannot be removed); the hook
only records here, so the commands are harmless ones."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import KIT_ROOT

STUDENT = '''\
import functools, gc, json, os, sys, weakref

import numpy as np


class Receipt:
    pass


def finalizer_runs_a_shell():
    receipt = Receipt()
    weakref.finalize(receipt, os.system, "true")
    return receipt


def finalizer_walks_the_objects():
    receipt = Receipt()
    weakref.finalize(receipt, gc.get_objects)
    return receipt


class Bound:
    __del__ = functools.partial(os.system, "true")


def partial_dunder():
    return Bound()


HOLDER = []


def chain_opens_a_file(path):
    """open() mapped by a finalizer: a writable file of the kit's, handed back."""
    receipt = Receipt()
    weakref.finalize(receipt, list, map(HOLDER.append, map(open, [path], ["w"])))
    return receipt


SOME_BYTES = np.zeros(8, np.uint8)  # a readable address, so the logged read is harmless


def chain_reads_memory():
    """ctypes reached through sys.modules (no import of it), called by a finalizer."""
    receipt = Receipt()
    memory = sys.modules["ctypes"]
    weakref.finalize(receipt, memory.string_at, SOME_BYTES.__array_interface__["data"][0], 8)
    return receipt


def chain_moves_a_file(src, dst):
    """os.replace bound by a finalizer: a file of its own moved where the kit writes."""
    receipt = Receipt()
    weakref.finalize(receipt, os.replace, src, dst)
    return receipt


def writes_json(path):
    """Ordinary code: json.dump to a file of its own (the encoder calls id())."""
    with open(path, "w") as f:
        json.dump({"a": [1, 2], "b": {"c": 3}}, f)


def chain_runs_a_string():
    receipt = Receipt()
    weakref.finalize(receipt, exec, "x = 1")
    return receipt


class Peek:
    __del__ = functools.partial(list, map(HOLDER.append, map(sys._getframe, [0])))


def chain_takes_a_frame():
    return Peek()


def module_written_elsewhere(scratch):
    with open(os.path.join(scratch, "helper_w.py"), "w") as f:
        f.write("import sys\\ndef peek():\\n    return sys._getframe(1).f_locals\\n")
    sys.path.append(scratch)
    import helper_w
    return helper_w
'''

KIT = '''\
def drop(make):
    make()  # the result dropped here, in a kit frame


def call(function):
    return function()
'''

DRIVER = '''\
import ctypes, functools, gc, sys, weakref  # loaded before arming, as in the worker
from pathlib import Path
from grader.worker import guard
from grader.worker.common import read_roots

folder, kit, scratch = (Path(a) for a in sys.argv[1:4])
hook = guard.Guard(folder, [kit], folder.parent / "guard.jsonl", [scratch],
                   [folder, *read_roots()])
hook.log_only = True
hook.arm()
sys.path[:0] = [str(folder), str(kit)]
import student, kitcode

for name in ("finalizer_runs_a_shell", "finalizer_walks_the_objects", "partial_dunder"):
    print("stage", name, flush=True)
    kitcode.drop(getattr(student, name))
kitcode.drop(functools.partial(student.chain_opens_a_file, str(folder.parent / "r.json")))
kitcode.drop(student.chain_takes_a_frame)
kitcode.drop(student.chain_runs_a_string)
kitcode.drop(student.chain_reads_memory)
student.writes_json(str(scratch / "mine.json"))
(scratch / "forged.json").write_text("{}")
kitcode.drop(functools.partial(student.chain_moves_a_file, str(scratch / "forged.json"),
                               str(folder.parent / "counts.json")))
print("holder", len(student.HOLDER), flush=True)
helper = student.module_written_elsewhere(str(scratch))
kitcode.call(helper.peek)
'''


def test_callbacks_the_interpreter_runs_and_modules_written_elsewhere_are_refused(tmp_path):
    folder, kit, scratch = (tmp_path / name for name in ("sub", "kit", "scratch"))
    for path in (folder, kit, scratch):
        path.mkdir()
    (folder / "student.py").write_text(STUDENT)
    (kit / "kitcode.py").write_text(KIT)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER), str(folder),
                             str(kit), str(scratch)], cwd=KIT_ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in
               (tmp_path / "guard.jsonl").read_text().splitlines()]
    events = [(r["event"], r["file"]) for r in records]
    assert [e for e, _ in events] == ["os.system", "gc.get_objects", "os.system", "open",
                                      "sys._getframe", "compile", "exec",
                                      "ctypes.string_at", "os.rename", "sys._getframe"],\
        records
    # The frameless ones name where the interpreter ran them; the written module's frame
    # is the submission's, by its file name.
    assert all(file.startswith("called from ") for _, file in events[:9]), events
    assert events[9][1] == "helper_w.py", events
