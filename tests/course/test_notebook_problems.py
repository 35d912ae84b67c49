"""Notebooks the grader cannot grade as they are, said clearly: no graded (tagged) cell at
all, the kit's tags stripped (cells then recognised by their ids, and what is lost
without those named), in `python -m grader` and in the course's autograde."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader import cellmap
from grader.course import nbcourse
from grader.course.notebook import ASSIGNMENTS, build_notebook, write_notebook
from grader.nbextract import NO_GRADED_CELLS, NoGradedCells, extract, extract_notebooks
from grader.submissions import resolve
from tests.conftest import run_kit

PART1 = next(a for a in ASSIGNMENTS if a.name == "part1-gemm")


def _stripped(ids: bool) -> dict:
    """Part 1's naive notebook with every cell's metadata stripped (and its ids, unless
    `ids`), as some editors and converters leave it."""
    notebook = build_notebook(PART1, modules=("gemm_1_naive",))
    for n, cell in enumerate(notebook["cells"]):
        cell["metadata"] = {}
        if not ids:
            cell["id"] = f"c{n:04x}a1"
    return notebook


def test_a_notebook_without_graded_cells_is_an_error(tmp_path):
    path = write_notebook(_stripped(ids=False), tmp_path / "hw.ipynb")
    with pytest.raises(NoGradedCells, match="hw.ipynb: the notebook has no graded cells"):
        extract([path], tmp_path / "out")
    notes, problem = cellmap.read_notes(tmp_path / "out")
    assert problem == NO_GRADED_CELLS.format(name="hw.ipynb") and notes == []


def test_tags_stripped_but_ids_kept_are_recognised_with_a_note(tmp_path):
    path = write_notebook(_stripped(ids=True), tmp_path / "hw.ipynb")
    done = extract_notebooks([path], tmp_path / "out")
    assert done.names == ["gemm_1_naive"] and not done.empty
    source = (tmp_path / "out" / "gemm_1_naive.py").read_text()
    assert "import numpy as np" in source  # the imports cell is not dropped
    assert len(done.notes) == 1 and "had lost the kit's tag" in done.notes[0]


def test_a_lost_imports_cell_is_named(tmp_path):
    """Tags and ids stripped, nbgrader's grade ids kept: the solution cells are found by
    them, the imports cell (which has none) is not, and the note says so."""
    notebook = build_notebook(PART1, modules=("gemm_1_naive",))
    for n, cell in enumerate(notebook["cells"]):
        cell["metadata"].pop("nnkit", None)
        cell["id"] = f"c{n:04x}a1"
    path = write_notebook(notebook, tmp_path / "hw.ipynb")
    done = extract_notebooks([path], tmp_path / "out")
    assert done.names == ["gemm_1_naive"]
    assert any("the first cell of gemm_1_naive.py (its imports and constants) could not be "
               "recognised" in n for n in done.notes)


def test_one_empty_notebook_among_others_is_a_note(tmp_path):
    good = write_notebook(build_notebook(PART1, modules=("gemm_1_naive",)), tmp_path / "a.ipynb")
    empty = write_notebook(_stripped(ids=False) | {"cells": []}, tmp_path / "b.ipynb")
    done = extract_notebooks([good, empty], tmp_path / "out")
    assert done.names == ["gemm_1_naive"] and done.empty == [empty]
    assert done.notes == [NO_GRADED_CELLS.format(name="b.ipynb")]
    assert cellmap.read_notes(tmp_path / "out") == (done.notes, None)


def test_the_grader_reports_the_problem_not_missing_modules(tmp_path):
    path = write_notebook(_stripped(ids=False), tmp_path / "hw.ipynb")
    [sub] = resolve([path], tmp_path / "nb")
    assert sub.problem == NO_GRADED_CELLS.format(name="hw.ipynb")
    out = tmp_path / "grades"
    done = run_kit("grader", str(path), "--parts", "gemm", "--kernels", "naive", "--out",
                   str(out))
    assert done.returncode == 1, done.stderr[-2000:]  # as for any submission graded zero
    assert "hw.ipynb: the notebook has no graded cells" in done.stderr
    report = json.loads((out / "hw.json").read_text())
    assert all("the notebook has no graded cells" in item["message"] and item["points"] in
               (0.0, None) for item in report["items"])
    assert "missing" not in json.dumps(report["items"])


def _submit(course: Path, student: str, notebook: dict) -> None:
    write_notebook(notebook, course / "submitted" / student / "part1-gemm" / "part1-gemm.ipynb")


def test_autograde_names_students_whose_notebooks_have_no_graded_cells(tmp_path):
    course = tmp_path / "course"
    _submit(course, "alice", build_notebook(PART1, modules=("gemm_1_naive",)))
    _submit(course, "grace", _stripped(ids=False))
    _submit(course, "heidi", _stripped(ids=True))
    students = {s.name: s for s in nbcourse.extract_all(course, ["part1-gemm"])}
    errors, notes = nbcourse.problems(list(students.values()))
    assert [e.split(":")[0] for e in errors] == ["grace"]
    assert "the notebook has no graded cells" in errors[0]
    assert [n.split(":")[0] for n in notes] == ["heidi"] and "lost the kit's tag" in notes[0]
    # The kit's grader reads the problem from beside grace's folder: her report says it.
    [sub] = resolve([students["grace"].folder], tmp_path / "nb")
    assert "the notebook has no graded cells" in sub.problem


def test_autograde_exits_non_zero_when_a_notebook_could_not_be_graded(tmp_path, monkeypatch):
    lines: list[str] = []
    monkeypatch.setattr(nbcourse, "autograde_class",
                        lambda *args, **kwargs: (tmp_path / "gradebook.csv", lines))
    assert nbcourse.main(["autograde", "--course", str(tmp_path)]) == 0
    lines.append("grace: nothing graded: hw.ipynb: the notebook has no graded cells")
    assert nbcourse.main(["autograde", "--course", str(tmp_path)]) == 1


def test_a_cell_is_judged_by_the_kit_cases_of_its_own_function():
    """net.kernels grades three functions: a failing add_bias case must not cost the
    bias_sigmoid cell; a rule broken anywhere in the item, or a GEMM item that failed,
    costs the cell of its function."""
    from grader.course.testcells import kit_failure

    kernels = {"id": "net.kernels", "points": 4.0, "max_points": 6.0, "integrity": None,
               "message": "1 of 3 cases fail",
               "checks": [{"case": "bias_sigmoid 37x10", "passed": True},
                          {"case": "add_bias 37x10", "passed": False, "message": "wrong"}]}
    assert kit_failure(kernels, "bias_sigmoid") is None
    assert kit_failure(kernels, "add_bias") == "add_bias 37x10: wrong"
    assert kit_failure({**kernels, "integrity": "the guard stopped it"},
                       "bias_sigmoid") == "the guard stopped it"
    gemm = {"id": "gemm.naive.correctness", "points": 0.0, "max_points": 10.0,
            "message": "2 of 9 cases fail", "checks": [{"case": "17x5x3 AB", "passed": False}]}
    assert kit_failure(gemm, "gemm_naive") == "2 of 9 cases fail"
    assert kit_failure({**gemm, "points": 10.0}, "gemm_naive") is None


def test_a_student_id_named_like_a_record_stops_no_class(tmp_path):
    """`make autograde` wrote bob's record, extracted/bob.notebook.json, and then could not
    make the folder of a student whose id is bob.notebook.json: the class went ungraded
    (red team). That student is told to rename; bob is graded as ever."""
    course = tmp_path / "course"
    for name in ("bob", "bob.notebook.json"):
        (course / "submitted" / name / "part1-gemm").mkdir(parents=True)
    target = tmp_path / "elsewhere.ipynb"
    target.write_text("{}")
    (course / "submitted" / "bob" / "part1-gemm" / "part1-gemm.ipynb").symlink_to(target)
    students = {s.name: s for s in nbcourse.extract_all(course, ["part1-gemm"])}
    assert "a symbolic link" in students["bob"].problem
    assert "rename the student" in students["bob.notebook.json"].problem
    assert (course / "extracted" / "bob").is_dir()
