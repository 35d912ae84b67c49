"""The static policy for graded modules (grader/checks/policy/): every correct way of writing the
assignment passes (the solution, the starter, the example bugs, differently written
submissions in tests/policy/alt_*), and hostile submissions (tests/policy/hostile/*) fail
with the rule each line breaks, marked in the files as `# expect: rule[, rule]`."""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from grader.checks import policy
from grader.checks.policy import RULES, Violation, check
from grader.checks.policy import names as policy_names
from grader.examples import load_spec
from tests.conftest import KIT_ROOT, TESTS

FIXTURES = TESTS / "policy"
HOSTILE = FIXTURES / "hostile"
ALTERNATIVES = sorted(p for p in FIXTURES.glob("alt_*") if p.is_dir())
MODULES = {"gemm": ["gemm_1_naive", "gemm_2_shared", "gemm_3_register",
                    "gemm_4_hierarchical"],
           "net": ["net_1_kernels", "net_2_backprop"],
           "mpi": ["mpi_1_data_parallel", "mpi_2_ring"]}
PART_OF = {module: part for part, modules in MODULES.items() for module in modules}
BUG_SPECS = sorted([*(KIT_ROOT / "examples" / "bugs").glob("*.toml"),
                    *(KIT_ROOT / "tests" / "bugs").rglob("*.toml")])
EXPECT = re.compile(r"# expect: ([\w\-, ]+)")


def _graded(folder: Path) -> list[tuple[str, str]]:
    return [(m, PART_OF[m]) for m in PART_OF if (folder / f"{m}.py").is_file()]


def _violations(folder: Path) -> list[Violation]:
    found = []
    for module, part in _graded(folder):
        found += check(folder, module, part)
    return found


def _expected(folder: Path) -> set[tuple[str, int, str]]:
    expected = set()
    for path in folder.glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = EXPECT.search(line)
            if match:
                expected |= {(path.name, number, rule.strip())
                             for rule in match.group(1).split(",")}
    return expected


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


# ---------------------------------------------------------------------------------------
# Correct code passes


@pytest.mark.parametrize("impl", ["solution", "starter"])
def test_solution_and_starter_pass(impl):
    folder = KIT_ROOT / impl
    assert len(_graded(folder)) == sum(map(len, MODULES.values())) == 8
    assert _violations(folder) == []


@pytest.mark.parametrize("spec_path", BUG_SPECS, ids=lambda p: p.stem)
def test_example_bugs_pass(spec_path, tmp_path):
    """A bug is not a cheat: every bug spec applied to the solution passes the policy."""
    spec = load_spec(spec_path)
    shutil.copytree(KIT_ROOT / "solution", tmp_path / "sub")
    for edit in spec.edits:
        target = tmp_path / "sub" / edit["file"]
        text = target.read_text()
        assert text.count(edit["old"]) == 1
        target.write_text(text.replace(edit["old"], edit["new"]))
    assert _violations(tmp_path / "sub") == []


# Alternatives that keep every point with a style note: (rule, text) of each.
# What the policy notes in an alternative; the MPI rules only where the grader lets them
# off, outside the graded function's reach (grader/parts/mpi.py, policy/scope.py: here a
# demo main() that only the main guard calls).
NOTED = {"alt_gemm_helper_module": {("import", "import logging")},
         "alt_gemm_selftest": {("import", "import unittest"), ("import", "np.random"),
                               ("host-copy", "dC.copy_to_host")},
         "alt_mpi_typedict": {("import", "from mpi4py.util.dtlib import from_numpy_dtype")},
         "alt_mpi_ring_demo": {("mpi-comm", "MPI.COMM_WORLD")},
         "alt_mpi_point_to_point": {("mpi-abort", "comm.Abort")}}  # a note anywhere
SCOPED = {"mpi-comm", "mpi-collective"}


@pytest.mark.parametrize("folder", ALTERNATIVES, ids=lambda p: p.name)
def test_alternative_submissions_pass(folder):
    assert _graded(folder), "an alternative without graded modules"
    found = _violations(folder)
    noted = NOTED.get(folder.name, set())
    assert [v for v in found if policy.is_cheat(v)
            and not (v.rule in SCOPED and (v.rule, v.text) in noted)] == []
    assert {(v.rule, v.text) for v in found} == noted


def test_there_are_enough_alternatives_and_bugs():
    assert len(ALTERNATIVES) >= 4
    assert len(BUG_SPECS) >= 15


# ---------------------------------------------------------------------------------------
# Hostile code fails, each line with its rule

HOSTILE_FOLDERS = sorted(p for p in HOSTILE.iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", HOSTILE_FOLDERS, ids=lambda p: p.name)
def test_hostile_submissions_fail_with_the_right_rule(folder):
    expected = _expected(folder)
    assert expected, "a hostile fixture without `# expect:` markers"
    violations = _violations(folder)
    found = {(v.file, v.line, v.rule) for v in violations}
    described = {(v.file, v.line, v.rule): v.describe() for v in violations}
    assert not expected - found, f"not caught: {sorted(expected - found)}"
    assert not found - expected, "unexpected: " + "; ".join(
        described[k] for k in sorted(found - expected))


def test_every_rule_is_exercised_by_a_hostile_fixture():
    used = set()
    for folder in HOSTILE_FOLDERS:
        used |= {rule for _, _, rule in _expected(folder)}
    assert used >= set(RULES) - {"file"}  # files: tested below, in temporary folders


CHEATS = KIT_ROOT / "tests" / "cheats"
# Nothing wrong in the source: a run tells (scalar_smuggle: the replay on new operands;
# half_precision: the float32 error bound).
RUNTIME_ONLY = {"memory_bomb", "mutate_inputs", "scalar_smuggle", "half_precision"}


@pytest.mark.parametrize("name", sorted(p.name for p in CHEATS.iterdir() if p.is_dir()))
def test_the_kits_cheats(name):
    """tests/cheats: each is refused statically, except those only a run can tell."""
    found = check(CHEATS / name, "gemm_1_naive", "gemm")
    assert bool(found) == (name not in RUNTIME_ONLY), [v.describe() for v in found]


def test_hostile_fixtures_read_by_the_grader_do_not_run(tmp_path):
    """The policy reads; it never imports: a module that would exit at import is fine."""
    folder = _write(tmp_path, {"gemm_1_naive.py": "import os\nos._exit(3)\n"})
    assert [v.rule for v in check(folder, "gemm_1_naive", "gemm")] == ["import"]


# ---------------------------------------------------------------------------------------
# Specific rules


def _rules(tmp_path, source: str, module: str = "gemm_1_naive", **siblings) -> list:
    folder = _write(tmp_path / "sub", {f"{module}.py": source,
                                       **{f"{k}.py": v for k, v in siblings.items()}})
    return [(v.rule, v.line) for v in check(folder, module, PART_OF.get(module, "gemm"))]


def test_describe_names_file_line_code_and_rule():
    violation = Violation("import", "gemm_1_naive.py", 3, "import ctypes")
    assert violation.describe().startswith(
        "gemm_1_naive.py, line 3: import ctypes — graded modules may import only numpy, ")
    assert Violation("file", "x.py", 0, "x.py is a link").describe().startswith(
        "x.py: x.py is a link — ")
    assert policy.summary([violation] * 5, limit=2).endswith("(and 3 more)")


def test_unknown_part_is_an_error(tmp_path):
    with pytest.raises(ValueError):
        check(tmp_path, "gemm_1_naive", "cuda")


def test_missing_and_unparsable_modules_give_nothing(tmp_path):
    assert check(tmp_path, "gemm_1_naive", "gemm") == []
    assert _rules(tmp_path, "def broken(:\n    import ctypes\n") == []
    assert _rules(tmp_path, "x = 1\n\0import os\n") == []


def test_main_block_is_skipped_but_its_else_is_checked(tmp_path):
    source = ("import numpy as np\n"
              "if __name__ == '__main__':\n    import os\n    np.einsum('ii', 1)\n"
              "else:\n    import ctypes\n"
              "if '__main__' == __name__:\n    import sys\n"
              "if __name__ != '__main__':\n    import socket\n")
    assert _rules(tmp_path, source) == [("import", 6), ("import", 10)]


def test_the_source_is_read_as_python_reads_it(tmp_path):
    """A coding cookie: what looks like a comment in UTF-8 is an import in UTF-7."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "gemm_1_naive.py").write_bytes(
        b"# -*- coding: utf-7 -*-\n# harmless +AAo-import ctypes\n")
    assert [v.rule for v in check(folder, "gemm_1_naive", "gemm")] == ["import"]


def test_oversized_and_odd_files_are_refused_not_skipped(tmp_path):
    big = _write(tmp_path / "big", {"gemm_1_naive.py": "# pad\n" * (policy.MAX_BYTES // 6 + 10)})
    assert [(v.rule, v.line) for v in check(big, "gemm_1_naive", "gemm")] == [("file", 0)]
    linked = _write(tmp_path / "linked", {"hidden.txt": "import ctypes\n"})
    (linked / "gemm_1_naive.py").symlink_to("hidden.txt")
    found = check(linked, "gemm_1_naive", "gemm")
    assert [v.rule for v in found] == ["file"] and "link" in found[0].text
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "gemm_1_naive.py")
    assert [v.rule for v in check(fifo, "gemm_1_naive", "gemm")] == ["file"]


@pytest.mark.parametrize("shadow", ["helpers.cpython-311-x86_64-linux-gnu.so", "helpers.so",
                                    "helpers.abi3.so", "helpers.pyc", "helpers/__init__.py",
                                    "link"])
def test_siblings_python_would_not_load_from_the_checked_file(tmp_path, shadow):
    folder = _write(tmp_path / "sub", {
        "gemm_1_naive.py": "from .helpers import TILE\n",
        "helpers.py": "TILE = 32\n"})
    if shadow == "link":
        (folder / "helpers.py").unlink()
        (folder / "real.py").write_text("import ctypes\n")
        (folder / "helpers.py").symlink_to("real.py")
    else:
        (folder / shadow).parent.mkdir(exist_ok=True)
        (folder / shadow).write_bytes(b"\x7fELF")
    found = check(folder, "gemm_1_naive", "gemm")
    assert [(v.rule, v.line) for v in found] == [("file", 1)], [v.describe() for v in found]


def test_absolute_sibling_imports_and_decoys_of_installed_modules(tmp_path):
    # a sibling by absolute name is checked like a relative one
    assert _rules(tmp_path / "a", "import helpers\nfrom helpers import X\n",
                  helpers="import ctypes\nX = 1\n") == [("import", 1)]
    # a file named like an installed module is not what `import` finds: refused
    for decoy in ("cffi", "psutil", "numpy_helpers_that_do_not_exist"):
        found = _rules(tmp_path / decoy, f"import {decoy}\n", **{decoy: "X = 1\n"})
        installed = decoy != "numpy_helpers_that_do_not_exist"
        assert found == ([("import", 1)] if installed else []), decoy


def test_deep_nesting_does_not_crash_the_grader(tmp_path):
    deep = "x = " + "+".join(["1"] * 60000) + "\n"
    found = _rules(tmp_path, deep)
    assert found in ([], [("file", 0)])
    nested = "x = " + "[" * 150 + "]" * 150 + "\n"
    assert _rules(tmp_path / "n", nested) == []


def test_builtins_are_fine_when_shadowed_by_a_local(tmp_path):
    source = ("def f(id, open):\n    return id + open\n"
              "def g():\n    vars = 3\n    return vars\n"
              "class C:\n    def __init__(self):\n        super().__init__()\n"
              "        self._x = 1\n    def get(self):\n        return self._x\n"
              "    def bad(self):\n        return self.__dict__\n")
    assert _rules(tmp_path, source) == [("private", 13)]


def test_super_with_arguments_only_as_its_class_and_self(tmp_path):
    """super(C, self) is the old spelling of super(); super(type(req), req).Free() reached
    MPI's own Free past the ring's watched request, and super(Other, x) any class's."""
    source = ("class C(list):\n"
              "    def __init__(self):\n        super(C, self).__init__()\n"
              "    @classmethod\n    def make(cls):\n        return super(C, cls).__init__\n"
              "    def free(self, req):\n        super(type(req), req).Free()\n"
              "    def other(self):\n        return super(list, self).__len__()\n"
              "    def outside(self):\n        def inner():\n            return super(C, self)\n"
              "        return inner\n"
              "    def rebound(self):\n        self = 3\n        return super(C, f())\n")
    assert _rules(tmp_path, source) == [("builtin", 8), ("builtin", 10), ("builtin", 13),
                                        ("builtin", 17)]


def test_self_inside_a_methods_comprehension_or_lambda_is_self(tmp_path):
    """A comprehension or lambda in a method sees the method's self, as a nested def does
    (a launcher's `tuple(... for n, b in zip(dims, self._block))` lost a whole item),
    unless it binds the name itself."""
    source = ("class Launch:\n    def __init__(self, block):\n        self._block = block\n"
              "    def grid(self, n):\n"
              "        return tuple((n + b - 1) // b for b in self._block)\n"
              "    def later(self):\n        return lambda: self._block\n"
              "    def rows(self):\n        return {i: self._block[i] for i in range(2)}\n"
              "    def shadowed(self, others):\n"
              "        return [self._block for self in others]\n")
    assert _rules(tmp_path, source) == [("private", 11)]


def test_class_patterns_on_the_submissions_own_plain_classes_pass(tmp_path):
    """`match` on a dataclass, a NamedTuple, an enum or a builtin type's own value reads
    what the submission defined; tests/policy/hostile/match_patterns has the refusals."""
    source = ("from dataclasses import dataclass\nfrom enum import Enum\n"
              "from typing import NamedTuple\n"
              "@dataclass(frozen=True)\nclass Plan:\n    grid: tuple\n    block: tuple\n"
              "class Shape(NamedTuple):\n    m: int\n    n: int\n"
              "class Kind(Enum):\n    A = 1\n"
              "class Wide(Plan):\n    pass\n"
              "def f(x):\n    match x:\n"
              "        case Plan(grid=g, block=(bx, _)):\n            return g, bx\n"
              "        case Wide(g, b):\n            return b\n"
              "        case Shape(m=m, n=n) | Shape(m, n):\n            return m * n\n"
              "        case int(n):\n            return n\n"
              "        case str():\n            return 1\n"
              "        case Kind.A | {\"k\": _} | (_, _):\n            return 0\n")
    assert _rules(tmp_path, source) == []


def test_a_ring_classs_own_phases_are_not_collectives(tmp_path):
    """A ring written as a class with methods named after its phases (reduce_scatter,
    allgather) calls its own methods; collectives on anything else stay refused."""
    source = ("from mpi4py import MPI\n"
              "class Ring:\n    def __init__(self, comm):\n        self.comm = comm\n"
              "    def reduce_scatter(self):\n        return 0\n"
              "    def allgather(self):\n        return self.reduce_scatter()\n"
              "def ring_allreduce(comm, buffer):\n    if comm == MPI.COMM_NULL:\n"
              "        return buffer\n    ring = Ring(comm)\n    ring.reduce_scatter()\n"
              "    ring.allgather()\n    comm.Allreduce(MPI.IN_PLACE, buffer)\n"
              "    return buffer\n")
    assert _rules(tmp_path, source, "mpi_2_ring") == [("mpi-collective", 15)]


def test_a_classs_own_eval_and_private_class_attributes(tmp_path):
    """`net.eval(X)` calls the submission's own method, and `Workspace._cache` reads its
    own class's attribute; eval elsewhere, and privates of a class with a library base,
    stay refused."""
    source = ("import numpy as np\n"
              "class Workspace:\n    _cache = {}\n"
              "    @staticmethod\n    def get(n):\n"
              "        return Workspace._cache.setdefault(n, np.zeros(n))\n"
              "class Net:\n    def eval(self, X):\n        return self.compile(X)\n"
              "    def compile(self, X):\n        return X\n"
              "class Wide(np.ndarray):\n    pass\n"
              "def forward(X):\n    return Net().eval(X), Wide._x, np.eval\n")
    assert sorted(_rules(tmp_path, source)) == [("builtin", 15), ("private", 15)]


def test_a_ring_class_in_a_helper_module_and_a_constant_from_part_3s_other_module(tmp_path):
    """The ring's own class may live in a helper module, and a constant imported from
    mpi_1_data_parallel brings only its value into the ring's reach, not that module's
    collectives."""
    helper = ("class Ring:\n    def __init__(self, comm):\n        self.comm = comm\n"
              "    def reduce_scatter(self):\n        return 0\n"
              "    def allgather(self):\n        return 1\n")
    data_parallel = ("import numpy as np\nDTYPE = np.float32\n"
                     "def allreduce_gradients(comm, grads, n_local, n_total):\n"
                     "    comm.Allreduce(grads[0], grads[1])\n    return grads\n")
    source = ("from mpi_1_data_parallel import DTYPE\nfrom ring_tools import Ring\n"
              "def ring_allreduce(comm, buffer):\n    ring = Ring(comm)\n"
              "    ring.reduce_scatter()\n    ring.allgather()\n"
              "    return buffer.astype(DTYPE)\n")
    assert _rules(tmp_path, source, "mpi_2_ring", ring_tools=helper,
                  mpi_1_data_parallel=data_parallel) == []


def test_hasattr_may_name_an_array_interface(tmp_path):
    """hasattr(A, "__cuda_array_interface__") tells a device array from a host one and
    answers a bool; the name anywhere else stays refused (a dict key of that name makes
    any object an array over any address)."""
    source = ("def launch(A):\n    if hasattr(A, \"__cuda_array_interface__\"):\n"
              "        return 1\n    return {\"__cuda_array_interface__\": 0}\n")
    assert _rules(tmp_path, source) == [("private", 4)]


def test_self_rebound_loses_its_privileges(tmp_path):
    source = ("import numpy as np\nclass C:\n    def m(self):\n        self = np\n"
              "        return self._core\n")
    assert ("private", 5) in _rules(tmp_path, source)


def test_derived_datatypes_are_not_new_communicators(tmp_path):
    """A row datatype for Scatterv (tests/policy/alt_mpi_nonblocking) is made, committed
    and freed; the communicator's own Create_group is still refused. (Free is not: a
    persistent request is freed by that name too.)"""
    source = ("from mpi4py import MPI\n"
              "def f(comm, d):\n"
              "    row = MPI.FLOAT.Create_contiguous(d)\n"
              "    row.Commit()\n"
              "    block = MPI.FLOAT.Create_vector(2, 3, 4).Commit()\n"
              "    block.Free()\n"
              "    row.Free()\n"
              "    comm.Free()\n"
              "    comm.Create_group(comm.Get_group())\n")
    assert _rules(tmp_path, source, module="mpi_1_data_parallel") == [("mpi-comm", 9)]


@pytest.mark.parametrize(("source", "expected"), [
    ("from mpi4py import MPI\n"
     "def f(comm: MPI.Comm):\n"
     "    assert isinstance(comm, MPI.Intracomm)\n"
     "    assert isinstance(comm, (MPI.Comm, MPI.Intercomm)) or issubclass(int, MPI.Info)\n"
     "    cls = MPI.Intracomm\n"
     "    isinstance(comm, MPI.Comm.f2py(0))\n"
     "    return isinstance(comm, tuple(x for x in [MPI.Comm]))\n",
     [("mpi-comm", 5), ("mpi-comm", 6), ("mpi-comm", 7)]),
    ("from mpi4py import MPI\n"  # an isinstance of the submission's own
     "def isinstance(a, b):\n"
     "    return b\n"
     "def f(comm):\n"
     "    return isinstance(comm, MPI.Intracomm)\n",
     [("mpi-comm", 5)]),
    ("from mpi4py.MPI import Intracomm, Comm as C\n"  # the classes imported by name
     "def f(comm: Intracomm) -> C:\n"
     "    assert isinstance(comm, (Intracomm, C))\n"
     "    kind = Intracomm\n"
     "    return Intracomm.f2py(0), C.Get_parent()\n",
     [("mpi-comm", 4), ("mpi-comm", 5), ("mpi-comm", 5)]),
])
def test_communicator_classes_only_in_annotations_and_isinstance_tests(tmp_path, source,
                                                                        expected):
    """`isinstance(comm, MPI.Intracomm)` is a student's sanity check and hands out a bool;
    the class as a value (a handle's way back to COMM_WORLD), its methods, or a test by an
    isinstance of the submission's own are refused."""
    assert _rules(tmp_path, source, module="mpi_1_data_parallel") == expected


def test_names_of_classes_may_be_read_but_not_the_classes(tmp_path):
    """A __repr__ writes `type(self).__name__` or `self.__class__.__name__`: strings. The
    class itself (`self.__class__`, its __dict__ or __mro__) stays refused."""
    source = ("class Plan:\n"
              "    def __repr__(self):\n"
              "        return type(self).__name__ + self.__class__.__qualname__ + (\n"
              "            Plan.__doc__ or '')\n"
              "    def leak(self):\n"
              "        return self.__class__, type(self).__mro__, self.__class__.__dict__\n"
              "    def rename(self):\n"
              "        type(self).__name__ = 'x'\n")
    assert _rules(tmp_path, source, module="mpi_1_data_parallel") == [
        ("private", 6), ("private", 6), ("private", 8)]  # (self.__class__ once a line)


def test_self_is_trusted_only_where_python_binds_it(tmp_path):
    """A method may use underscore attributes of its first argument where Python hands it
    the object it was called on: plain methods, properties, classmethods, functools'
    caches. Under staticmethod, singledispatchmethod or a decorator of the submission's
    own, the first argument is whatever the caller passes; so it is for a method kept in
    its class's body (before the worker seals the class) other than by another name or
    in a property."""
    source = ("import functools\n"
              "def mine(f):\n"
              "    return staticmethod(f)\n"
              "class C:\n"
              "    def plain(self):\n"
              "        return self._a\n"
              "    @property\n"
              "    def prop(self):\n"
              "        return self._a\n"
              "    @functools.lru_cache(maxsize=None)\n"
              "    def cached(self):\n"
              "        return self._a\n"
              "    @staticmethod\n"
              "    def static(self):\n"
              "        return self._a\n"
              "    @mine\n"
              "    def wrapped(self):\n"
              "        return self._a\n"
              "    @functools.singledispatchmethod\n"
              "    def dispatched(self, x):\n"
              "        return self._a\n")
    assert _rules(tmp_path, source, module="mpi_1_data_parallel") == [
        ("private", 15), ("private", 18), ("private", 21)]
    kept = ("import functools\n"
            "class C:\n"
            "    def grab(self):\n"
            "        return self._a\n"
            "    def put(self, v):\n"
            "        self._a = v\n"
            "    __call__ = grab\n"
            "    a = property(grab, put)\n"
            "    raw = staticmethod(grab)\n"
            "    kept = (grab,)\n"
            "    pm = functools.partialmethod(grab)\n"
            "    def default(self, f=grab):\n"
            "        return f\n"
            "    listed = [f for f in (grab, put)]\n")
    assert _rules(tmp_path / "kept", kept, module="mpi_1_data_parallel") == [
        ("private", 9), ("private", 10), ("private", 11), ("private", 12), ("private", 14),
        ("private", 14)]


def test_deepcopy_only_without_a_memo(tmp_path):
    """copy.deepcopy(x) copies a student's gradients; its memo maps id()s (addresses) to
    objects, so a memo passed in, deepcopy as a value (partial, map) and __deepcopy__
    are refused, as are copy's other names (dispatch_table reaches pickling)."""
    source = ("import copy\n"
              "from copy import deepcopy\n"
              "import functools\n"
              "def f(grads, memo):\n"
              "    a = copy.deepcopy(grads) + deepcopy(grads) + [copy.copy(grads)]\n"
              "    copy.deepcopy(grads, memo)\n"
              "    deepcopy(grads, memo=memo)\n"
              "    functools.partial(copy.deepcopy, memo=memo)\n"
              "    list(map(deepcopy, grads, memo))\n"
              "    copy.dispatch_table.clear()\n"
              "    return a\n"
              "class C:\n"
              "    def __deepcopy__(self, memo):\n"
              "        return memo\n")
    assert _rules(tmp_path, source, module="mpi_1_data_parallel") == [
        ("builtin", 6), ("builtin", 7), ("builtin", 8), ("builtin", 9), ("builtin", 10),
        ("private", 13)]


def test_numpy_in_gemm_is_for_scalars_and_setup_but_free_in_mpi(tmp_path):
    source = ("import numpy as np\n"
              "a = np.float32(1) + np.zeros(3) + np.array([1, 2]) + np.ceil(2.5)\n"
              "b = np.sum(a)\n"
              "c = np.asarray(a)\n")
    assert _rules(tmp_path / "g", source) == [("array-library", 3), ("host-copy", 4)]
    assert _rules(tmp_path / "m", source, module="mpi_1_data_parallel") == []


def test_ring_rule_follows_what_the_ring_uses(tmp_path):
    helper = ("def used(comm, b):\n    return deeper(comm, b)\n"
              "def deeper(comm, b):\n    comm.Allreduce(b, b)\n"
              "def other(comm, b):\n    comm.Allreduce(b, b)\n")
    ring = "from .helper import used\ndef ring_allreduce(comm, b):\n    used(comm, b)\n"
    folder = _write(tmp_path / "sub", {"mpi_2_ring.py": ring, "helper.py": helper,
                                       "mpi_1_data_parallel.py": "from .helper import other\n"})
    assert [(v.file, v.line, v.rule) for v in check(folder, "mpi_2_ring", "mpi")] == [
        ("helper.py", 4, "mpi-collective")]
    assert check(folder, "mpi_1_data_parallel", "mpi") == []


def test_the_ring_may_not_free_a_request_through_the_class(tmp_path):
    """The ring's requests refuse Free while incomplete (nnkit/collectives.py); the class's
    own Free, called with the request, would go past that. Elsewhere it is allowed."""
    ring = ("from mpi4py import MPI\n"
            "def ring_allreduce(comm, b):\n"
            "    r = comm.Isend(b, dest=0)\n"
            "    MPI.Request.Free(r)\n"
            "    MPI.Request.Waitall([r])\n")
    folder = _write(tmp_path / "sub", {"mpi_2_ring.py": ring, "mpi_1_data_parallel.py": ring})
    assert [(v.line, v.rule) for v in check(folder, "mpi_2_ring", "mpi")] == [
        (4, "mpi-request")]
    assert check(folder, "mpi_1_data_parallel", "mpi") == []


def test_kernels_read_only_constants(tmp_path):
    source = ("from nnkit.backend import cuda\nimport numpy as np\n"
              "TILE = 16\nSHAPE = (TILE, 2 * TILE)\nA, B = 1, 2.5\nDT = np.float32\n"
              "LATER = 1\nLATER = 2\nTABLE = [1, 2]\n"
              "@cuda.jit\ndef k(X):\n"
              "    s = cuda.shared.array(SHAPE, DT)\n"
              "    X[0, 0] = TILE + A + B + LATER + TABLE[0] + s[0, 0]\n")
    assert _rules(tmp_path, source) == [("kernel-global", 13), ("kernel-global", 13)]


def test_a_module_level_builtin_shadow_is_not_a_builtin_in_kernels(tmp_path):
    source = ("from nnkit.backend import cuda\n"
              "def range(n):\n    return [0]\n"
              "@cuda.jit\ndef k(X):\n    for i in range(3):\n        X[i] = 0\n")
    assert _rules(tmp_path, source) == [("kernel-call", 6)]


def test_type_expressions_literals_and_stub_kernels_pass(tmp_path):
    source = ("from typing import Callable, Optional\nimport numpy as np\n"
              "from nnkit.backend import cuda, to_device\n"
              "GemmFn = Callable[..., None]\nPair = tuple[int, None]\n"
              "TABLE = to_device(np.array([1, 2, -3]))\n"
              "def forward(weights, biases, X, gemm: Callable[..., None]) -> Optional[list]:\n"
              "    return [np.asarray(X)]\n"
              "@cuda.jit\ndef stub(A):\n    ...\n")
    assert _rules(tmp_path, source, module="net_2_backprop") == [("host-copy", 8)]


def test_collective_names():
    assert all(policy_names.is_collective(n) for n in (
        "Allreduce", "allreduce", "Iallreduce", "Allreduce_init", "Reduce_scatter_block",
        "Ibcast", "Neighbor_allgather", "Exscan", "gather", "Scatterv"))
    assert not any(policy_names.is_collective(n) for n in (
        "Sendrecv", "Isend", "Irecv", "Barrier", "Ibarrier", "Reduce_local", "Waitall"))


# ---------------------------------------------------------------------------------------
# The lists track the running interpreter and numpy


def _module_attributes(module) -> list[str]:
    return sorted(name for name, value in vars(module).items()
                  if isinstance(value, types.ModuleType) and not name.startswith("_"))


@pytest.mark.parametrize("name", sorted(set(policy_names.HELPERS) | {"math", "cmath"}))
def test_helper_modules_hand_out_no_modules(name, tmp_path):
    module = sys.modules.get(name) or __import__(name, fromlist=["_"])
    allowed = set(policy_names.SUBMODULES.get(name, {}))
    attributes = [a for a in _module_attributes(module) if a not in allowed]
    if not attributes:
        return
    source = f"import {name} as m\n" + "".join(f"x{i} = m.{a}\n"
                                                for i, a in enumerate(attributes))
    found = _rules(tmp_path, source)
    assert len(found) == len(attributes), (attributes, found)


def test_numpy_hands_out_only_its_allowed_submodules(tmp_path):
    names = set(_module_attributes(np)) | {"fft", "polynomial", "random", "ctypeslib", "ma",
                                           "testing", "lib", "linalg", "rec", "char",
                                           "strings", "f2py", "core"}
    names -= policy_names.NUMPY_SUBMODULES
    source = "import numpy as np\n" + "".join(f"x{i} = np.{a}\n"
                                              for i, a in enumerate(sorted(names)))
    for module, part in (("gemm_1_naive", "gemm"), ("mpi_1_data_parallel", "mpi")):
        found = _rules(tmp_path / part, source, module=module)
        assert len(found) == len(names), (part, sorted(names), found)


@pytest.mark.slow
@pytest.mark.parametrize("package", ["nnkit", "grader"])
def test_any_python_is_checked_without_internal_errors(package, tmp_path):
    """Fail closed is for gaps in the checker: the kit's own (very unlike a submission)
    source must go through it without one."""
    for n, source in enumerate(sorted((KIT_ROOT / package).glob("*.py"))):
        folder = tmp_path / str(n)
        folder.mkdir()
        shutil.copy(source, folder / "gemm_1_naive.py")
        for part in ("gemm", "mpi"):  # the net rules are the gemm rules
            texts = [v.text for v in check(folder, "gemm_1_naive", part)]
            assert not any("could not be checked" in t or "too deeply" in t
                           for t in texts), (source.name, texts)


def test_checking_is_fast():
    start = time.perf_counter()
    for _ in range(5):
        _violations(KIT_ROOT / "solution")
    assert (time.perf_counter() - start) / 5 < 2.0


def test_another_communicator_is_a_note_in_the_data_module_and_fails_the_ring(tmp_path):
    """Part 3's items apply the policy (grader/parts/mpi.py). The data-parallel functions
    get the real communicator, uncounted: a default of MPI.COMM_WORLD or comm.Abort there
    forges nothing and is a note. The ring's communicator counts its bytes: there it fails."""
    from grader.checks import anticheat
    from grader.parts.mpi import DATA_NOTES

    data = ("from mpi4py import MPI\n\n"
            "def allreduce_gradients(comm=MPI.COMM_WORLD, grads=(), n_local=0, n_total=1):\n"
            "    if n_total <= 0:\n"
            "        comm.Abort(1)\n"
            "    return grads\n")
    ring = ("from mpi4py import MPI\n\n"
            "def ring_allreduce(comm, buffer):\n"
            "    MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, buffer)\n")
    _write(tmp_path, {"mpi_1_data_parallel.py": data, "mpi_2_ring.py": ring})
    lenient = anticheat.policy_verdict(tmp_path, "mpi_1_data_parallel", "mpi", "enforce",
                                       DATA_NOTES)
    assert lenient.failure == "" and "MPI.COMM_WORLD" in lenient.note
    assert "comm.Abort" in lenient.note
    strict = anticheat.policy_verdict(tmp_path, "mpi_2_ring", "mpi", "enforce")
    assert "MPI.COMM_WORLD" in strict.failure
    # comm.Abort on an error path is a note even without the lenient scope: at run time
    # it only ends the submission's own job (and the ring's communicator refuses it).
    aborting = anticheat.policy_verdict(tmp_path, "mpi_1_data_parallel", "mpi", "enforce")
    assert "comm.Abort" in aborting.note and "comm.Abort" not in aborting.failure


def test_modules_that_look_objects_up_by_a_dotted_string_fail_the_item(tmp_path):
    """Past every attribute rule: pydoc.locate, pkgutil.resolve_name, string.Formatter's
    get_field. Found reading this session's change to format fields once more."""
    source = "import pydoc\nimport pkgutil\nfrom string import Formatter\nimport sys\n"
    found = check(_write(tmp_path, {"gemm_1_naive.py": source}), "gemm_1_naive", "gemm")
    cheats = {v.line for v in found if policy.is_cheat(v)}
    assert cheats == {1, 2, 3}  # `import sys` stays a note
