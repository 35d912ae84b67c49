"""nbgrader round trip with the sample class of three, and a fourth student whose notebook
is not even JSON: release -> submissions -> autograde -> gradebook. Kept to the naive GEMM
so that it runs in about half a minute; the full course goes through the same code
(`make release sample-class autograde`)."""

import csv
import json
import shutil

import pytest

pytest.importorskip("nbgrader", reason="the nbgrader extra: pip install -e '.[nbgrader]'")

from grader import nbcourse  # noqa: E402
from grader.dist import solution_regions  # noqa: E402
from grader.hidden_checks import HIDDEN  # noqa: E402
from nnkit.submission import NAMED  # noqa: E402

SOLUTION_LINES = {line for region in solution_regions(NAMED["solution"]) for line in region
                  if len(line) > 20}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    released = nbcourse.release(course, ["part1-gemm"], ["gemm_1_naive"])
    nbcourse.sample_class(course)
    broken = course / "submitted" / "dave" / "part1-gemm" / "part1-gemm.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    # An instructor drops the solution's module into source/ after the release: nbgrader
    # would copy it over bob's own file, were it not excluded from overwriting.
    shutil.copy(NAMED["solution"] / "gemm_1_naive.py",
                course / "source" / "part1-gemm" / "gemm_1_naive.py")
    gradebook = nbcourse.autograde(course, jobs=2)
    rows = {r["student"]: r for r in csv.DictReader(open(gradebook))}
    return course, released, rows


def _lines(path):
    return {line.strip() for line in path.read_text().splitlines()}


def test_release_holds_stubs_and_visible_checks_only(course):
    _, released, _ = course
    text = released[0].read_text()
    assert "raise NotImplementedError()" in text and 'check(\\"gemm_naive\\", gemm_naive)' in text
    assert "HIDDEN TESTS" not in text and repr(HIDDEN["gemm_naive"]) not in text
    assert not any(line in text for line in SOLUTION_LINES)


def test_gradebook_has_the_right_scores(course):
    _, _, rows = course
    assert sorted(rows) == ["alice", "bob", "carol", "dave"]
    expected = {"alice": ("1", "10"), "bob": ("0", "0"), "carol": ("0", "0"),
                "dave": ("0", "0")}
    for student, (notebook, kit) in expected.items():
        row = rows[student]
        assert (row["nbgrader:part1-gemm"], row["kit:gemm.naive.correctness"]) == (notebook, kit)
        assert row["nbgrader:part1-gemm:max"] == "1" and row["kit_max"] == "10"
        assert float(row["total"]) == float(notebook) + float(kit)
        assert row["max_total"] == "11"


def test_stubs_score_zero_and_no_source_file_reaches_the_grader(course):
    course_dir, _, _ = course
    assert (course_dir / "autograded" / "bob" / "part1-gemm" / "gemm_1_naive.py").read_text() \
        == "# bob's own copy, never graded\n"
    for student in ("bob", "carol"):
        graded = course_dir / "extracted" / student / "gemm_1_naive.py"
        assert sorted(p.name for p in graded.parent.iterdir()) == ["gemm_1_naive.py"]
    assert "raise NotImplementedError()" in (course_dir / "extracted" / "bob" /
                                             "gemm_1_naive.py").read_text()
    assert not SOLUTION_LINES & _lines(course_dir / "extracted" / "bob" / "gemm_1_naive.py")
    report = json.loads((course_dir / "kit_grades" / "bob.json").read_text())
    assert "NotImplementedError" in report["items"][0]["message"]


def test_hidden_checks_ran_at_autograde(course):
    course_dir, _, _ = course
    notebook = json.loads((course_dir / "autograded" / "alice" / "part1-gemm" /
                           "part1-gemm.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {})
                .get("grade_id") == "test-gemm_naive")
    assert "BEGIN HIDDEN TESTS" in "".join(cell["source"])
    printed = "".join("".join(o.get("text", "")) for o in cell["outputs"])
    assert printed.count("case(s) passed") == 2  # the visible check, then the hidden one
