"""Scores back into nbgrader's gradebook and the course's gradebook.csv.

    python -m grader.course.gradebook --manual marks.csv [--course build/course]

merges an instructor's CSV of the items graded by hand (grader/manual.py) into the kit's
reports of an autograded course (DIR/kit_grades/) and rewrites DIR/gradebook.csv with
them: each is a `kit:` column and counts in the totals. nbgrader's own database holds
grades of notebook cells only; the reports are no cell, so they live in the CSV.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import warnings
from pathlib import Path

from grader import safe_io
from grader.course.testcells import CellResult, CheckCell, Student, open_gradebook
from grader.reports.report import csv_cell, csv_value, write_atomic
from nnkit.submission import KIT_ROOT


def _timestamp(folder: Path) -> dict:
    """nbgrader's submission time, when the submission carries one."""
    stamp = folder / "timestamp.txt"  # the student's folder: read as any student file
    try:
        return {"timestamp": safe_io.read_text(stamp, 100).strip()}
    except (OSError, ValueError):
        return {}


def save_scores(course: Path, students: list[Student], assignments: list[str],
                cells: dict[str, list[CheckCell]],
                results: dict[tuple[str, str], list[CellResult]]
                ) -> dict[str, dict[str, tuple[float, float]]]:
    """Write the test cells' points into nbgrader's gradebook, as `nbgrader autograde`
    would have; returns student -> assignment -> (score, max_score) read back from it."""
    from nbgrader.api import InvalidEntry
    from sqlalchemy.exc import SAWarning

    scores: dict[str, dict[str, tuple[float, float]]] = {}
    # nbgrader's add_submission makes SQLAlchemy warn about its own autoflush; noise.
    with open_gradebook(course) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        maxima = {a: float(gb.find_assignment(a).max_score) for a in assignments}
        for s in students:
            gb.update_or_create_student(s.name)
            scores[s.name] = {a: (0.0, maxima[a]) for a in assignments}
            for assignment, notebook in s.notebooks.items():
                try:
                    submission = gb.update_or_create_submission(
                        assignment, s.name, **_timestamp(notebook.parent))
                except (InvalidEntry, ValueError):  # a timestamp nbgrader cannot read
                    submission = gb.update_or_create_submission(assignment, s.name)
                for cell, result in zip(cells[assignment], results[s.name, assignment],
                                        strict=True):
                    grade = gb.find_grade(cell.grade_id, cell.notebook, assignment, s.name)
                    grade.auto_score = result.points
                    # A grader's manual score stays and wants a look, as nbgrader does it.
                    grade.needs_manual_grade = grade.manual_score is not None
                gb.db.commit()
                scores[s.name][assignment] = (float(submission.score),
                                              float(submission.max_score))
    return scores


def autograded_notebook(submitted: Path, cells: list[CheckCell], results: list[CellResult]) -> dict:
    """The submitted notebook as formgrader shows it: no output of the student's, and each
    test cell as released (hidden tests in) with what it printed here."""
    notebook = json.loads(submitted.read_text())
    by_id = {c.grade_id: (c, r) for c, r in zip(cells, results, strict=True)}
    seen = set()
    out_cells = []
    for cell in notebook.get("cells", []):
        if not isinstance(cell, dict):
            continue
        meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        grade_id = (meta.get("nbgrader") or {}).get("grade_id") if isinstance(
            meta.get("nbgrader"), dict) else None
        if grade_id in by_id and grade_id not in seen:
            seen.add(grade_id)
            out_cells.append(_test_output_cell(*by_id[grade_id], cell.get("id")))
            continue
        if cell.get("cell_type") == "code":
            cell = {**cell, "outputs": [], "execution_count": None}
        out_cells.append(cell)
    out_cells += [_test_output_cell(c, r, None) for c, r in zip(cells, results, strict=True)
                  if c.grade_id not in seen]  # a test cell the student deleted
    return {**notebook, "cells": out_cells}


def _test_output_cell(cell: CheckCell, result: CellResult, cell_id: str | None) -> dict:
    outputs: list[dict] = []
    if result.output:
        outputs.append({"output_type": "stream", "name": "stdout", "text": result.output})
    if result.error is not None:
        outputs.append({"output_type": "error", "ename": "AssertionError",
                        "evalue": result.error, "traceback": [result.error]})
    return {"cell_type": "code", "id": cell_id or cell.grade_id, "execution_count": None,
            "source": cell.source, "outputs": outputs,
            "metadata": {"nbgrader": {"schema_version": 3, "grade": True, "solution": False,
                                      "locked": True, "points": cell.points,
                                      "grade_id": cell.grade_id}}}




def write_gradebook(course: Path, assignments: list[str], students: list[str],
                    nb: dict[str, dict[str, tuple[float, float]]]) -> Path:
    """DIR/gradebook.csv: nbgrader's score per assignment, the kit's items, the totals."""
    with open(course / "kit_grades" / "grades.csv", newline="") as f:
        kit = {csv_value(row["submission"]): row for row in csv.DictReader(f)}
    # The kit's grades.csv also names each submission's report id and grading date.
    items = [k for k in next(iter(kit.values()), {}) if k not in (
        "submission", "id", "graded", "total", "max_total")]
    header = ["student"]
    for a in assignments:
        header += [f"nbgrader:{a}", f"nbgrader:{a}:max"]
    header += ["nbgrader_total", "nbgrader_max", *(f"kit:{i}" for i in items), "kit_total",
               "kit_max", "total", "max_total"]
    path = course / "gradebook.csv"
    # Written whole, then renamed over the old file: it is also what merge_manual reads
    # the nbgrader columns back from, so a half-written one would lose them.
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(header)
    for student in students:
        scores = [nb.get(student, {}).get(a, (0.0, 0.0)) for a in assignments]
        nb_total, nb_max = sum(s for s, _ in scores), sum(m for _, m in scores)
        row = kit.get(student, {})
        kit_total, kit_max = float(row.get("total") or 0), float(row.get("max_total") or 0)
        writer.writerow([csv_cell(student), *[f"{x:g}" for pair in scores for x in pair],
                         f"{nb_total:g}", f"{nb_max:g}", *(row.get(i, "") for i in items),
                         f"{kit_total:g}", f"{kit_max:g}", f"{nb_total + kit_total:g}",
                         f"{nb_max + kit_max:g}"])
    write_atomic(path, buffer.getvalue())
    return path


def nbgrader_scores(course: Path) -> tuple[list[str], list[str],
                                          dict[str, dict[str, tuple[float, float]]]]:
    """(assignments, students, student -> assignment -> (score, max)) as the course's
    gradebook.csv holds them (written by autograde)."""
    with open(course / "gradebook.csv", newline="") as f:
        rows = list(csv.DictReader(f))
        header = list(rows[0]) if rows else []
    assignments = [h.split(":", 1)[1] for h in header
                   if h.startswith("nbgrader:") and not h.endswith(":max")]
    scores = {csv_value(r["student"]): {a: (float(r[f"nbgrader:{a}"] or 0),
                                 float(r[f"nbgrader:{a}:max"] or 0)) for a in assignments}
              for r in rows}
    return assignments, [csv_value(r["student"]) for r in rows], scores


def merge_manual(course: Path, marks: Path, config_path: Path | None = None) -> Path:
    """The CSV's hand-given grades merged into DIR/kit_grades/ (its reports, grades.csv,
    feedback and Gradescope files), then DIR/gradebook.csv rewritten; returns its path.
    Raises manual.ManualError (every bad line named) before anything is written."""
    from grader import manual
    from grader.pipeline import write_class_reports, write_feedback
    from grader.reports.report import Gradebook
    from grader.scoring import DEFAULT_CONFIG, load_config

    if not (course / "gradebook.csv").is_file():
        raise manual.ManualError(f"{course}: no gradebook.csv (run autograde first)")
    config = load_config(config_path or DEFAULT_CONFIG)
    book = Gradebook(course / "kit_grades")
    grades = manual.read_manual(marks, config, manual.student_keys(book.reports()))
    write_feedback(manual.merge_into(book, grades, config), book.out)
    write_class_reports(book)
    assignments, students, scores = nbgrader_scores(course)
    return write_gradebook(course, assignments, students, scores)


def main(argv: list[str] | None = None) -> int:
    from grader.manual import ManualError
    from grader.scoring import DEFAULT_CONFIG, ConfigError

    parser = argparse.ArgumentParser(prog="python -m grader.course.gradebook",
                                     description="merge hand-given grades into the course's "
                                                 "gradebook.csv")
    parser.add_argument("--manual", type=Path, required=True,
                        help="student,item,points[,comment] (grader/manual.py)")
    parser.add_argument("--course", type=Path, default=KIT_ROOT / "build" / "course")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    args = parser.parse_args(argv)
    try:
        path = merge_manual(args.course, args.manual, args.config)
    except (ManualError, ConfigError, OSError, KeyError, ValueError) as err:
        print(f"grader.course.gradebook: {err}", file=sys.stderr)
        return 2
    print(f"gradebook: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
