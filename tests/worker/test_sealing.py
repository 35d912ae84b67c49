"""A submission's methods work on its own objects (grader/worker/sealing.py): called
through the class with a module, a kit object or a library's as `self`, they raise; on
the submission's own objects, plain data (a helper written without @staticmethod), in
dataclasses, NamedTuples, enums, properties, caches and subclasses in a sibling module
they work as before; a method that keeps no state of its own takes anything. Run in a
fresh interpreter: the hook replaces builtins.__build_class__."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import KIT_ROOT

STUDENT = '''\
import dataclasses
import enum
import functools
from typing import NamedTuple

import numpy as np


class Peek:
    def __init__(self):
        self._seen = 1

    def observer(self):
        return self._seen

    @property
    def seen(self):
        return self._seen

    @classmethod
    def through_cls(cls, target):
        return cls.observer(target)

    @functools.lru_cache(maxsize=None)
    def cached(self):
        return self._seen + 1

    @functools.cached_property
    def once(self):
        return self._seen + 2


class Util:
    def grid(n):
        return (n + 15) // 16

    def named(x):  # no state of its own: any first argument
        return type(x).__name__


@dataclasses.dataclass
class Shape:
    rows: int
    _cols: int = 3

    def size(self):
        return self.rows * self._cols


class Layer(NamedTuple):
    W: object

    def width(self):
        return self.W.shape[1]


class Kind(enum.Enum):
    NAIVE = 1

    def label(self):
        return self.name.lower()
'''

SIBLING = '''\
from student import Peek


class Deeper(Peek):
    def twice(self):
        return 2 * self.observer()
'''

DRIVER = '''\
import sys, types
from pathlib import Path
import numpy as np
from grader.worker import sealing

class Kit(np.ndarray):  # a library's array with state of its own (simcheck's shared arrays)
    pass

folder = Path(sys.argv[1])
sealing.install(folder)
sys.path.insert(0, str(folder))
import student, sibling

p = student.Peek()
print("own", p.observer(), p.seen, p.cached(), p.once, sibling.Deeper().twice(),
      student.Util.grid(40),
      student.Shape(2).size(), student.Layer(np.ones((2, 5))).width(),
      student.Kind.NAIVE.label(), student.Peek.observer(sibling.Deeper()),
      p.cached.cache_info().hits, student.Util.named(np.float32(1)))
for name, call in [("module", lambda: student.Peek.observer(np)),
                   ("cls", lambda: student.Peek.through_cls(types.SimpleNamespace(_seen=7))),
                   ("property", lambda: student.Peek.seen.fget(np.random)),
                   ("helper", lambda: print("helper took", student.Util.named(np))),
                   ("cache", lambda: student.Peek.cached(np)),
                   ("array subclass", lambda: student.Peek.observer(np.zeros(2).view(Kit))),
                   ("cached_property", lambda: student.Peek.once.func(np))]:
    try:
        call()
        print(name, "ran")
    except TypeError as err:
        print(name, "refused:", err)

class Outside:  # a class of another module: left alone
    def f(self):
        return 1
print("outside", Outside.f(np))
'''


def test_methods_refuse_foreign_objects_and_keep_working_on_their_own(tmp_path):
    (tmp_path / "student.py").write_text(STUDENT)
    (tmp_path / "sibling.py").write_text(SIBLING)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER), str(tmp_path)],
                            cwd=KIT_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "own 1 1 2 3 2 3 6 5 naive 1 0 float32" in out
    assert "helper took module" in out and "helper ran" in out
    for name in ("module", "cls", "property", "cache", "cached_property", "array subclass"):
        assert f"{name} refused: " in out, out
    assert "Peek.observer was called with 'module' as its first argument" in out
    assert "outside 1" in out
