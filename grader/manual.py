"""Items graded by hand (the reports, the profiling), from an instructor's CSV.

    python -m grader.manual GRADES_CSV [--out grades/] [--config grader/config.toml]
    python -m grader SUBMISSION ... --manual GRADES_CSV

The CSV has a header and one row per student and item:

    student,item,points,comment
    alice,report.quality,8.5,clear and well organised
    bob,report.profiling_final,31,

`student` is a submission's name or its id (both columns of grades.csv), `item` an item of
the config's [manual] table, `points` a number from 0 to the item's points, `comment`
(optional) what the student reads beside the points. The whole file is checked before
anything is written: an unknown student or item, points out of range or not a number, the
same student and item twice, a row of the wrong length or bytes that are not UTF-8 are
reported together, each with its line, and nothing is merged until they are fixed.

Merged, each manual item is an item of the submission's report like the others (grades.csv,
the feedback, Gradescope's results.json and, through grades.csv, the course's gradebook).
A student with no row for an item gets it as "not graded yet" (it counts in no total),
never as 0; a student whose report already holds hand-given points for an item and who
has no row in this CSV keeps them.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.reports.report import csv_value
from grader.results import FAIL, NOT_GRADED, PARTIAL, PASS
from grader.scoring import DEFAULT_CONFIG, Config, ConfigError, load_config

if TYPE_CHECKING:
    from grader.reports.report import Gradebook

COLUMNS = ("student", "item", "points")  # required; "comment" is optional
MAX_BYTES = 16 << 20  # a class's CSV is a few KB
MAX_ERRORS = 20  # listed in one error; the rest counted
NOT_YET = ("not graded yet: this item is graded by hand (from your report); its points "
           "appear here once the instructors have graded it")


class ManualError(ValueError):
    """The instructor's CSV cannot be merged as it stands; the message names every line."""


@dataclass(frozen=True)
class ManualGrade:
    student: str
    item: str
    points: float
    comment: str
    line: int  # of the CSV, from 1 (the header)


def _decode(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8-sig")  # a spreadsheet's BOM is not part of the header
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ManualError(f"{path}, line {line}: not UTF-8 (byte {raw[err.start]:#04x}); "
                          "save the file as UTF-8 CSV") from None


def read_manual(path: Path, config: Config,
                students: Mapping[str, str | None] | Iterable[str] | None = None
                ) -> dict[str, dict[str, ManualGrade]]:
    """student -> item -> grade from the CSV at `path`, checked against the config's [manual]
    items and, when given, the known `students`: a key -> report id mapping
    (student_keys), whose ids then key the result, so that a student's name and id are one
    student; or plain names. Raises ManualError naming every bad line."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as err:
        raise ManualError(f"{path}: cannot read it ({err.strerror or err})") from None
    if len(raw) > MAX_BYTES:
        raise ManualError(f"{path}: larger than {MAX_BYTES >> 20} MB; not a grades CSV")
    if not config.manual:
        raise ManualError(f"{path}: the config has no [manual] items to grade by hand")
    text = _decode(raw, path)
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise ManualError(f"{path}, line {line}: a NUL byte; not a CSV file")
    known: dict[str, str | None] | None = None
    if isinstance(students, Mapping):
        known = dict(students)
    elif students is not None:
        known = {k: k for k in students}
    reader = csv.reader(io.StringIO(text, newline=""))
    errors: list[str] = []
    grades: dict[str, dict[str, ManualGrade]] = {}
    try:
        header = [h.strip().lower() for h in next(reader, [])]
        columns = _columns(header)
        for cells in reader:
            row = [csv_value(cell) for cell in cells]  # names as grades.csv writes them
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            grade, problem = _grade(row, columns, line, config, known)
            if problem:
                errors.append(f"line {line}: {problem}")
                continue
            earlier = grades.setdefault(grade.student, {}).get(grade.item)
            if earlier is not None:
                errors.append(f"line {line}: {grade.student}, {grade.item} again (first on "
                              f"line {earlier.line}); one row per student and item")
                continue
            grades[grade.student][grade.item] = grade
    except (csv.Error, _HeaderError) as err:
        errors.append(f"line {reader.line_num}: {err}")
    if errors:
        more = len(errors) - MAX_ERRORS
        listed = errors[:MAX_ERRORS] + ([f"... and {more} more"] if more > 0 else [])
        raise ManualError(f"{path}: {len(errors)} problem(s), nothing merged:\n  "
                          + "\n  ".join(listed))
    return grades


class _HeaderError(ValueError):
    pass


def _columns(header: list[str]) -> dict[str, int]:
    missing = [c for c in COLUMNS if c not in header]
    unknown = [h for h in header if h not in (*COLUMNS, "comment")]
    if missing or unknown or len(set(header)) != len(header):
        raise _HeaderError(f"the header must be {','.join(COLUMNS)}[,comment] (in any order), "
                           f"got {','.join(header) or 'nothing'}")
    return {name: header.index(name) for name in header}


def _grade(row: list[str], columns: dict[str, int], line: int, config: Config,
           known: dict[str, str | None] | None) -> tuple[ManualGrade | None, str]:
    """The row as a grade, or why it is not one."""
    if len(row) > len(columns) or len(row) < len(COLUMNS):
        return None, (f"{len(row)} fields where the header has {len(columns)} (a comma in a "
                      "comment needs quotes)")
    cell = {name: (row[n].strip() if n < len(row) else "") for name, n in columns.items()}
    student, item, text = cell["student"], cell["item"], cell["points"]
    if not student:
        return None, "no student"
    if known is not None:
        if student not in known:
            return None, f"unknown student {student!r} (not a submission of this grading)"
        if known[student] is None:
            return None, (f"{student!r} is one submission's name and another's id: give "
                          "the id (grades.csv's id column)")
        student = known[student]
    if item not in config.manual:
        return None, (f"unknown item {item!r}; the manual items are "
                      + ", ".join(config.manual))
    maximum = config.points(item)
    try:
        points = float(text)
    except ValueError:
        return None, f"points {text!r} is not a number"
    if not math.isfinite(points) or not 0 <= points <= maximum:
        return None, f"points {text} outside 0 to {maximum:g} for {item}"
    return ManualGrade(student, item, points, cell.get("comment", ""), line), ""


def manual_item(item_id: str, config: Config, grade: ManualGrade | None) -> dict:
    """The report's item for a hand-graded item: the grade's points and comment, or not
    graded yet (points None: it counts in no total)."""
    base = {"id": item_id, "title": config.title(item_id), "max_points": config.points(item_id),
            "checks": [], "figures": {"graded_by": "hand"}}
    if grade is None:
        return {**base, "points": None, "status": NOT_GRADED, "message": NOT_YET}
    maximum = config.points(item_id)
    status = PASS if grade.points >= maximum else FAIL if grade.points <= 0 else PARTIAL
    said = f"graded by hand: {grade.points:g} / {maximum:g}"
    return {**base, "points": grade.points, "status": status,
            "message": f"{said}; {grade.comment}" if grade.comment else said}


def apply_manual(report: dict, grades: dict[str, dict[str, ManualGrade]],
                 config: Config) -> dict:
    """The report (a submission's JSON dict) with every [manual] item of the config set
    from the student's rows (by name or id), kept where the report already holds hand-given
    points and there is no row now, else not graded yet; totals recomputed."""
    # By id alone where the report has one (grades read with student_keys are keyed by
    # id): a name may be chosen to equal another student's id.
    key = report["id"] if "id" in report else report.get("name", "")
    mine = grades.get(key, {})
    held = {it["id"]: it for it in report["items"] if it.get("id") in config.manual}
    items = [it for it in report["items"] if it.get("id") not in config.manual]
    for item_id in config.manual:
        earlier = held.get(item_id)
        if item_id not in mine and earlier is not None and earlier.get("points") is not None:
            items.append(earlier)
        else:
            items.append(manual_item(item_id, config, mine.get(item_id)))
    graded = [it for it in items if isinstance(it.get("points"), int | float)]
    return {**report, "items": items, "total": sum(it["points"] for it in graded),
            "max_total": sum(it.get("max_points", 0) for it in graded)}


def student_keys(reports: Iterable[dict]) -> dict[str, str | None]:
    """What the CSV's student column may say (a report's name or id) -> that report's id;
    None for a key that is one report's name and another's id (ambiguous)."""
    keys: dict[str, str | None] = {}
    for r in reports:
        rid = r.get("id")
        if not isinstance(rid, str):
            continue
        for k in (r.get("name"), rid):
            if isinstance(k, str):
                keys[k] = rid if keys.get(k, rid) == rid else None
    return keys


def merge_into(book: Gradebook, grades: dict[str, dict[str, ManualGrade]],
               config: Config) -> list[dict]:
    """Every report of the gradebook (an output folder) with the manual items merged,
    written back with grades.csv; returns the reports written (their feedback is stale)."""
    fresh = list(book.fresh)  # which rows this run graded: merging grades none
    written = [book.add(apply_manual(data, grades, config)) for data in book.reports()]
    book.fresh[:] = fresh
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.manual",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="student,item,points[,comment]")
    parser.add_argument("--out", type=Path, default=Path("grades"),
                        help="the grading run's output folder (default: grades/)")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    args = parser.parse_args(argv)
    from grader.pipeline import write_class_reports, write_feedback
    from grader.reports import report as reports

    try:
        config = load_config(args.config)
        if not args.out.is_dir():
            raise ManualError(f"{args.out}: no such folder (grade the code first)")
        known = reports.Gradebook(args.out).reports()
        if not known:
            raise ManualError(f"{args.out}: holds no report (grade the code first)")
        grades = read_manual(args.csv, config, student_keys(known))
    except (ConfigError, ManualError) as err:
        print(f"grader.manual: {err}", file=sys.stderr)
        return 2
    book = reports.Gradebook(args.out)
    written = merge_into(book, grades, config)
    write_feedback(written, args.out)
    write_class_reports(book)
    given = sum(len(v) for v in grades.values())
    print(f"{given} hand-given grade(s) merged into {len(written)} report(s) in {args.out}/ "
          "(grades.csv, feedback/, gradescope/)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
