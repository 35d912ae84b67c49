"""nbgrader round trip: release -> submissions -> autograde -> gradebook, with the sample
class of three (alice the solution, bob the stubs, carol a bug), dave whose notebook is
not even JSON, and three hostile students: eve's cells attack the grading machine,
frank's fake the checks, mallory's notebook is a link to the source notebook, and
oscar's launcher computes the product on the host behind an empty kernel of his own. Kept to the
naive GEMM so that it runs in well under a minute; the full course goes through the same
code (`make release sample-class autograde`).

Autograde must never run a notebook: scratch cells are dropped unread, and the tagged
cells run only in the sandbox, where eve's attempts on the solution, the hidden checks,
the gradebook, the grader's sources and the grader's environment all fail."""

import csv
import hashlib
import json
import os
import shutil
import sqlite3

import pytest

pytest.importorskip("nbgrader", reason="the nbgrader extra: pip install -e '.[nbgrader]'")

from grader.course import nbcourse  # noqa: E402
from grader.course.dist import solution_regions  # noqa: E402
from grader.course.hidden import HIDDEN  # noqa: E402
from nnkit.submission import KIT_ROOT, NAMED  # noqa: E402

SOLUTION_LINES = {line for region in solution_regions(NAMED["solution"]) for line in region
                  if len(line) > 20}
SECRET = "nnkit-test-secret-8d1f0c"
MARK = "pwned-by-eve"
GUARDED = [NAMED["solution"] / "gemm_1_naive.py", KIT_ROOT / "grader" / "course" / "hidden.py",
           KIT_ROOT / "grader" / "checks" / "gemm.py"]

# Run at import of eve's module, in the sandbox: every attempt is recorded, and her kernel
# raises the record, so that it shows in the feedback of both graders.
ATTACK = '''
import os

import nnkit.checks as _checks

_EVIDENCE = []


def _try(what, action):
    try:
        _EVIDENCE.append(f"{{what}}: " + "DO" + f"NE {{action()!r}}"[:300])
    except Exception as err:
        _EVIDENCE.append(f"{{what}}: blocked ({{type(err).__name__}})")


_try("read solution", lambda: open({solution!r}).read())
_try("read hidden checks", lambda: open({hidden!r}).read())
_try("write gradebook", lambda: open({gradebook!r}, "ab").write(b{mark!r}))
_try("write gemm_checks", lambda: open({gemm_checks!r}, "a").write("# {mark}"))
_try("secret", lambda: os.environ["NNKIT_TEST_SECRET"])
_checks.check = lambda *args, **kwargs: print("gemm_naive: 2 case(s) passed")


def gemm_naive(A, B, C, alpha, beta):
    raise RuntimeError(" | ".join(_EVIDENCE))
'''

# Untagged: never runs. In a kernel it would fake the checks and leave a mark.
SCRATCH = '''
check = lambda *args, **kwargs: print("gemm_naive: 2 case(s) passed")
open({marker!r}, "w").write(open({solution!r}).read())
'''

# Frank's kernel does nothing, and his module switches off the checks' comparisons.
FAKER = '''
import nnkit.checks

nnkit.checks._close = lambda *args, **kwargs: None
nnkit.checks.check = lambda *args, **kwargs: print("gemm_naive: 2 case(s) passed")


def gemm_naive(A, B, C, alpha, beta):
    pass
'''

# Oscar's: the product computed on the host, then a kernel of his own launched that does
# nothing (a red team's: the test cell saw results and a launch, and passed).
HOST_PRODUCT = '''
import numpy as np

from nnkit.backend import cuda


@cuda.jit
def gemm_naive_kernel(C):
    pass


def gemm_naive(A, B, C, alpha, beta):
    a, b, c = A.copy_to_host(), B.copy_to_host(), C.copy_to_host()
    d = np.float32(alpha) * (a @ b) + (np.float32(beta) * c if beta != 0 else np.float32(0))
    for i in range(d.shape[0]):
        for j in range(d.shape[1]):
            C[i, j] = d[i, j]
    gemm_naive_kernel[1, 1](C)
'''


def _hash(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hostile(released, source, marker):
    """The release with every tagged cell replaced by `source`, a scratch cell, and the
    test cell emptied."""
    notebook = json.loads(json.dumps(released))
    first = True
    for cell in notebook["cells"]:
        if "nnkit" in cell["metadata"]:
            cell["source"], first = (source if first else ""), False
        if cell["metadata"].get("nbgrader", {}).get("grade"):
            cell["source"] = "pass"  # a locked cell the student edited
    scratch = {"cell_type": "code", "id": "scratch", "metadata": {}, "execution_count": None,
               "outputs": [], "source": SCRATCH.format(marker=str(marker),
                                                      solution=str(GUARDED[0]))}
    notebook["cells"].insert(3, scratch)
    return notebook


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    released = nbcourse.release(course, ["part1-gemm"], ["gemm_1_naive"])
    nbcourse.sample_class(course)
    submitted = course / "submitted"
    broken = submitted / "dave" / "part1-gemm" / "part1-gemm.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    release = json.loads(released[0].read_text())
    marker = course.parent / "scratch-cell-ran"
    attack = ATTACK.format(solution=str(GUARDED[0]), hidden=str(GUARDED[1]),
                           gradebook=str(course / "gradebook.db"), gemm_checks=str(GUARDED[2]),
                           mark=MARK)
    for student, code in (("eve", attack), ("frank", FAKER)):
        nbcourse.write_notebook(_hostile(release, code, marker),
                                submitted / student / "part1-gemm" / "part1-gemm.ipynb")
    host = json.loads(json.dumps(release))
    first = True
    for cell in host["cells"]:
        if "nnkit" in cell["metadata"]:
            cell["source"], first = (HOST_PRODUCT if first else ""), False
    nbcourse.write_notebook(host, submitted / "oscar" / "part1-gemm" / "part1-gemm.ipynb")
    # mallory's notebook is a link to the source notebook, solutions and all.
    linked = submitted / "mallory" / "part1-gemm" / "part1-gemm.ipynb"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(course / "source" / "part1-gemm" / "part1-gemm.ipynb")
    # An instructor drops the solution's module into source/ after the release: nothing
    # copies it anywhere.
    shutil.copy(NAMED["solution"] / "gemm_1_naive.py",
                course / "source" / "part1-gemm" / "gemm_1_naive.py")
    before = {path: _hash(path) for path in GUARDED}
    os.environ["NNKIT_TEST_SECRET"] = SECRET
    try:
        # The kit under test is a working tree: compare it with the release's manifest only.
        gradebook = nbcourse.autograde(course, jobs=2, allow_uncommitted=True)
    finally:
        del os.environ["NNKIT_TEST_SECRET"]
    rows = {r["student"]: r for r in csv.DictReader(open(gradebook))}
    return course, released, rows, before, marker


def _lines(path):
    return {line.strip() for line in path.read_text().splitlines()}


def _outputs(course_dir):
    """Every file autograde wrote."""
    for name in ("autograded", "extracted", "kit_grades"):
        yield from (p for p in (course_dir / name).rglob("*") if p.is_file())
    yield course_dir / "gradebook.csv"


def test_release_holds_stubs_and_visible_checks_only(course):
    _, released, *_ = course
    text = released[0].read_text()
    assert "raise NotImplementedError()" in text and 'check(\\"gemm_naive\\", gemm_naive)' in text
    assert "HIDDEN TESTS" not in text and repr(HIDDEN["gemm_naive"]) not in text
    assert not any(line in text for line in SOLUTION_LINES)


def test_gradebook_has_the_right_scores(course):
    _, _, rows, *_ = course
    assert sorted(rows) == ["alice", "bob", "carol", "dave", "eve", "frank", "mallory",
                            "oscar"]
    expected = {"alice": ("1", "10"), "bob": ("0", "0"), "carol": ("0", "0"),
                "dave": ("0", "0"), "eve": ("0", "0"), "frank": ("0", "0"),
                "mallory": ("0", "0"), "oscar": ("0", "0")}
    for student, (notebook, kit) in expected.items():
        row = rows[student]
        assert (row["nbgrader:part1-gemm"], row["kit:gemm.naive.correctness"]) == (notebook, kit)
        assert row["nbgrader:part1-gemm:max"] == "1" and row["kit_max"] == "10"
        assert float(row["total"]) == float(notebook) + float(kit)
        assert row["max_total"] == "11"


def test_scores_are_in_nbgrader_gradebook(course):
    from nbgrader.api import Gradebook

    course_dir, *_ = course
    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", course_id="nnkit") as gb:
        scores = {s: gb.find_submission("part1-gemm", s).score
                  for s in ("alice", "bob", "carol", "dave", "eve", "frank", "mallory",
                            "oscar")}
        grade = gb.find_grade("test-gemm_naive", "part1-gemm", "part1-gemm", "alice")
        assert grade.auto_score == 1 and not grade.needs_manual_grade
    assert scores == {"alice": 1, "bob": 0, "carol": 0, "dave": 0, "eve": 0, "frank": 0,
                      "mallory": 0, "oscar": 0}
    assert not list((course_dir / "extracted" / "mallory").iterdir())  # the link not followed


def test_stubs_score_zero_and_no_source_file_reaches_the_grader(course):
    course_dir, *_ = course
    assert (course_dir / "submitted" / "bob" / "part1-gemm" / "gemm_1_naive.py").read_text() \
        == "# bob's own copy, never graded\n"
    for student in ("bob", "carol"):
        graded = course_dir / "extracted" / student / "gemm_1_naive.py"
        assert sorted(p.name for p in graded.parent.iterdir()) == ["gemm_1_naive.py"]
    assert "raise NotImplementedError()" in (course_dir / "extracted" / "bob" /
                                             "gemm_1_naive.py").read_text()
    assert not SOLUTION_LINES & _lines(course_dir / "extracted" / "bob" / "gemm_1_naive.py")
    report = json.loads((course_dir / "kit_grades" / "bob.json").read_text())
    assert "NotImplementedError" in report["items"][0]["message"]


def _test_cell(course_dir, student):
    notebook = json.loads((course_dir / "autograded" / student / "part1-gemm" /
                           "part1-gemm.ipynb").read_text())
    return next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {})
                .get("grade_id") == "test-gemm_naive")


def test_hidden_checks_ran_at_autograde(course):
    course_dir, *_ = course
    cell = _test_cell(course_dir, "alice")
    assert "BEGIN HIDDEN TESTS" in "".join(cell["source"])
    printed = "".join("".join(o.get("text", "")) for o in cell["outputs"])
    assert printed.count("case(s) passed") == 2  # the visible check, then the hidden one


def test_hostile_cells_changed_nothing_and_learned_nothing(course):
    course_dir, _, _, before, marker = course
    assert {path: _hash(path) for path in GUARDED} == before
    assert not marker.exists()  # the scratch cell never ran
    assert MARK.encode() not in (course_dir / "gradebook.db").read_bytes()
    with sqlite3.connect(course_dir / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # eve's module breaks the rules for graded code (the kit's grader says so), and where
    # it ran, in the sandbox, the audit hook stopped its first attempt (what the jail
    # would have left readable is tested in tests/isolation/test_confinement.py).
    message = json.loads((course_dir / "kit_grades" / "eve.json").read_text())["items"][0][
        "message"]
    assert "breaks the rules for graded code" in message, message
    evalue = _test_cell(course_dir, "eve")["outputs"][-1]["evalue"]
    assert "the grader stopped the submission" in evalue and "DONE" not in evalue, evalue
    for path in _outputs(course_dir):
        text = path.read_text(errors="replace")
        assert SECRET not in text and "DONE" not in text, path
        if "eve" in path.parts or path.suffix == ".csv":
            assert not SOLUTION_LINES & _lines(path), path


def test_a_faked_check_earns_nothing(course):
    """frank's module replaced the checks inside his jobs: refused there as tampering, and
    the verdict is taken here anyway."""
    course_dir, *_ = course
    cell = _test_cell(course_dir, "frank")
    assert "BEGIN HIDDEN TESTS" in "".join(cell["source"])  # as released, not his `pass`
    evalue = cell["outputs"][-1]["evalue"]
    assert "changed the kit or a library" in evalue or "elements wrong" in evalue, evalue


def test_a_cell_passed_by_a_host_product_earns_nothing(course):
    """oscar's cell saw right results and a launch of his own kernel; the kit's item for
    gemm_naive, which replays launches and traps library products, zeroed it, and so the
    cell earns nothing, saying why."""
    course_dir, *_ = course
    evalue = _test_cell(course_dir, "oscar")["outputs"][-1]["evalue"]
    assert "the kit's grading of gemm.naive.correctness failed" in evalue, evalue
    assert "library matrix product" in evalue, evalue


def test_test_cells_must_be_check_calls():
    calls = nbcourse.parse_test_cell('check("gemm_naive", gemm_naive)\n'
                                     'check("gemm_naive", gemm_naive, [(1, 1, 1, 2.0, 0.0)], 3)')
    assert [(c.function, c.cases, c.seed) for c in calls] == [
        ("gemm_naive", None, 0), ("gemm_naive", [(1, 1, 1, 2.0, 0.0)], 3)]
    for bad in ("import os", 'check("gemm_naive", gemm_shared)', 'check("x", x)',
                'check("gemm_naive", gemm_naive, cases())'):
        with pytest.raises(nbcourse.CourseError):
            nbcourse.parse_test_cell(bad)


def test_nbgrader_autograde_by_hand_runs_no_cell(course):
    course_dir, *_ = course
    config = (course_dir / "nbgrader_config.py").read_text()
    assert 'c.Execute.kernel_name = "nnkit-use-make-autograde"' in config
