"""Items graded by hand (grader/manual.py): the instructor's CSV is checked whole, each bad
line named; merged grades reach grades.csv, the feedback, Gradescope's results.json and the
course's gradebook; a student without a row has the item "not graded yet", never 0."""

import csv
import json
from pathlib import Path

import pytest

from grader import manual
from grader.course.gradebook import main as gradebook_main
from grader.course.gradebook import write_gradebook
from grader.reports import feedback, gradescope
from grader.reports.report import Gradebook
from grader.results import FAIL, NOT_GRADED, PASS, ItemResult, SubmissionResult
from grader.scoring import load_config
from tests.conftest import run_kit

CONFIG = load_config()
HEADER = "student,item,points,comment\n"


def _result(name: str, points: float) -> SubmissionResult:
    item = ItemResult("gemm.naive.correctness", "Naive GEMM", 10.0, points,
                      PASS if points == 10 else FAIL, "graded by the machine")
    return SubmissionResult(name, f"/subs/{name}", "simulator", [item])


@pytest.fixture
def out(tmp_path) -> Path:
    """A grading run's output folder with alice (10/10), bob (0/10) and carol (10/10)."""
    folder = tmp_path / "grades"
    book = Gradebook(folder)
    for name, points in (("alice", 10.0), ("bob", 0.0), ("carol", 10.0)):
        book.add(_result(name, points))
    return folder


def _csv(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "manual.csv"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def _read(tmp_path, text, students=("alice", "bob", "carol")):
    return manual.read_manual(_csv(tmp_path, text), CONFIG, students)


def test_rows_are_read_with_comments_quotes_and_a_spreadsheet_bom(tmp_path):
    grades = _read(tmp_path, "\ufeff" + HEADER
                   + 'alice,report.quality,8.5,"clear, well organised"\n'
                   + "\n"  # blank lines are skipped
                   + "bob,report.profiling_final,31,\n")
    assert grades["alice"]["report.quality"].points == 8.5
    assert grades["alice"]["report.quality"].comment == "clear, well organised"
    assert grades["bob"]["report.profiling_final"].line == 4
    assert "carol" not in grades


def test_the_comment_column_is_optional_and_columns_any_order(tmp_path):
    grades = _read(tmp_path, "item,points,student\nreport.quality,10,carol\n")
    assert grades["carol"]["report.quality"].points == 10.0


@pytest.mark.parametrize("row, said", [
    ("mallory,report.quality,5,", "line 2: unknown student 'mallory'"),
    ("alice,report.typo,5,", "line 2: unknown item 'report.typo'; the manual items are"),
    ("alice,report.quality,11,", "line 2: points 11 outside 0 to 10 for report.quality"),
    ("alice,report.quality,-1,", "line 2: points -1 outside 0 to 10"),
    ("alice,report.quality,nan,", "line 2: points nan outside 0 to 10"),
    ("alice,report.quality,eight,", "line 2: points 'eight' is not a number"),
    ("alice,report.quality,8,good,clear", "line 2: 5 fields where the header has 4"),
    (",report.quality,8,", "line 2: no student"),
    ("alice,net.sgd,3,", "line 2: unknown item 'net.sgd'"),  # graded by the machine
])
def test_a_bad_row_is_named_and_nothing_is_merged(tmp_path, row, said):
    with pytest.raises(manual.ManualError, match="nothing merged") as err:
        _read(tmp_path, HEADER + row + "\ncarol,report.quality,9,\n")
    assert said in str(err.value)


def test_every_bad_line_is_listed_at_once(tmp_path):
    with pytest.raises(manual.ManualError) as err:
        _read(tmp_path, HEADER + "alice,report.quality,9,\nzed,report.quality,1,\n"
              "alice,report.quality,7,second\nbob,report.quality,99,\n")
    text = str(err.value)
    assert "3 problem(s)" in text and "line 3: unknown student 'zed'" in text
    assert "line 4: alice, report.quality again (first on line 2)" in text
    assert "line 5: points 99 outside 0 to 10" in text


def test_bad_encodings_and_headers_are_errors_not_crashes(tmp_path):
    with pytest.raises(manual.ManualError, match=r"line 3: not UTF-8 \(byte 0xe9\)"):
        _read(tmp_path, HEADER.encode() + b"alice,report.quality,9,ok\n"
              b"bob,report.quality,9,tr\xe8s bien\n".replace(b"\xe8", b"\xe9"))
    with pytest.raises(manual.ManualError, match="line 2: a NUL byte"):
        _read(tmp_path, HEADER + "alice,report.quality,9,\x00\n")
    with pytest.raises(manual.ManualError, match="line 1: the header must be student,item,"
                                                 "points"):
        _read(tmp_path, "name,item,score\nalice,report.quality,9\n")
    with pytest.raises(manual.ManualError, match="cannot read it"):
        manual.read_manual(tmp_path / "missing.csv", CONFIG)


def test_students_without_a_row_are_not_graded_yet_never_zero(tmp_path):
    grades = _read(tmp_path, HEADER + "alice,report.quality,8,tidy\n"
                   "alice,report.profiling_final,0,no profile\n")
    report = {"name": "bob", "id": "bob", "items": [
        {"id": "gemm.naive.correctness", "points": 10.0, "max_points": 10.0}],
        "total": 10.0, "max_total": 10.0}
    bob = manual.apply_manual(report, grades, CONFIG)
    added = [i for i in bob["items"] if i["id"] in CONFIG.manual]
    assert [i["id"] for i in added] == list(CONFIG.manual)
    assert all(i["points"] is None and i["status"] == NOT_GRADED for i in added)
    assert "not graded yet" in added[0]["message"]
    assert (bob["total"], bob["max_total"]) == (10.0, 10.0)
    alice = manual.apply_manual({**report, "name": "alice", "id": "alice"}, grades, CONFIG)
    by_id = {i["id"]: i for i in alice["items"]}
    assert by_id["report.quality"]["points"] == 8.0
    assert by_id["report.quality"]["message"] == "graded by hand: 8 / 10; tidy"
    assert by_id["report.profiling_final"]["points"] == 0.0  # a real 0, given by hand
    assert (alice["total"], alice["max_total"]) == (18.0, 60.0)


def test_a_grade_already_merged_is_kept_when_a_later_csv_lacks_the_row(tmp_path):
    first = manual.apply_manual({"name": "alice", "items": []},
                                _read(tmp_path, HEADER + "alice,report.quality,8,\n"), CONFIG)
    again = manual.apply_manual(first, _read(tmp_path, HEADER + "bob,report.quality,3,\n"),
                                CONFIG)
    assert next(i for i in again["items"] if i["id"] == "report.quality")["points"] == 8.0


def test_merged_grades_reach_grades_csv_feedback_gradescope_and_the_gradebook(tmp_path, out):
    grades = manual.read_manual(
        _csv(tmp_path, HEADER + "alice,report.quality,7.5,well argued\n"
             "bob,report.quality,10,\n"),
        CONFIG, manual.student_keys(Gradebook(out).reports()))
    written = {r["name"]: r for r in manual.merge_into(Gradebook(out), grades, CONFIG)}
    assert set(written) == {"alice", "bob", "carol"}

    with open(out / "grades.csv", newline="") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    assert rows["alice"]["report.quality"] == "7.5" and rows["alice"]["total"] == "17.5"
    assert rows["bob"]["report.quality"] == "10" and rows["bob"]["total"] == "10"
    assert rows["carol"]["report.quality"] == ""  # not graded yet: no number, not 0
    assert rows["carol"]["total"] == "10" and rows["carol"]["max_total"] == "10"
    stored = json.loads((out / "alice.json").read_text())
    assert stored["total"] == 17.5 and stored["max_total"] == 20

    md, _ = feedback.write_feedback(written["alice"], out / "feedback")
    text = md.read_text()
    assert "well argued" in text and "7.5 / 10" in text
    md, _ = feedback.write_feedback(written["carol"], out / "feedback")
    assert "not graded yet" in md.read_text()

    results = gradescope.gradescope_results(written["alice"])
    test = next(t for t in results["tests"] if t["extra_data"]["id"] == "report.quality")
    assert (test["score"], test["max_score"]) == (7.5, 10)
    assert results["score"] == 17.5
    pending = next(t for t in results["tests"]
                   if t["extra_data"]["id"] == "report.profiling_final")
    assert pending["max_score"] == 0 and "not graded" in pending["tags"]

    course = tmp_path / "course"
    (course / "kit_grades").mkdir(parents=True)
    (course / "kit_grades" / "grades.csv").write_text((out / "grades.csv").read_text())
    with open(write_gradebook(course, [], ["alice", "bob", "carol"], {}), newline="") as f:
        book = {r["student"]: r for r in csv.DictReader(f)}
    assert book["alice"]["kit:report.quality"] == "7.5"
    assert book["alice"]["total"] == "17.5" and book["carol"]["kit:report.quality"] == ""


def test_the_merge_command_refuses_a_bad_csv_and_merges_a_good_one(tmp_path, out):
    bad = _csv(tmp_path, HEADER + "alice,report.quality,12,\n")
    result = run_kit("grader.manual", str(bad), "--out", str(out), timeout=300)
    assert result.returncode == 2
    assert "line 2: points 12 outside 0 to 10 for report.quality" in result.stderr
    assert "report.quality" not in (out / "grades.csv").read_text()  # nothing merged

    good = _csv(tmp_path, HEADER + "bob,report.correctness_analysis,4,\n")
    result = run_kit("grader.manual", str(good), "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    with open(out / "grades.csv", newline="") as f:
        bob = next(r for r in csv.DictReader(f) if r["submission"] == "bob")
    assert bob["report.correctness_analysis"] == "4" and bob["total"] == "4"
    results = json.loads((out / "gradescope" / "bob.json").read_text())
    assert results["score"] == 4
    assert "graded by hand: 4 / 6" in (out / "feedback" / "bob.md").read_text()


def test_grading_with_a_bad_csv_stops_before_anything_is_graded(tmp_path):
    bad = _csv(tmp_path, HEADER + "solution,report.quality,5,\nnobody,report.quality,5,\n")
    out = tmp_path / "grades"
    result = run_kit("grader", "solution", "--parts", "gemm", "--kernels", "naive",
                     "--manual", str(bad), "--out", str(out), timeout=300)
    assert result.returncode == 2
    assert "line 3: unknown student 'nobody'" in result.stderr
    assert not list(out.glob("*.json"))


@pytest.mark.slow
def test_grading_with_a_csv_merges_it(tmp_path):
    good = _csv(tmp_path, HEADER + "solution,report.quality,9,crisp\n")
    out = tmp_path / "grades"
    result = run_kit("grader", "solution", "--parts", "gemm", "--kernels", "naive",
                     "--manual", str(good), "--out", str(out), "--seed", "2", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    with open(out / "grades.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert (row["gemm.naive.correctness"], row["report.quality"]) == ("10", "9")
    assert row["report.profiling_final"] == "" and row["total"] == "19"
    assert "crisp" in (out / "feedback" / "solution.md").read_text()
    tests = json.loads((out / "gradescope" / "solution.json").read_text())["tests"]
    assert [t["score"] for t in tests if t["extra_data"]["id"] == "report.quality"] == [9]


def test_the_course_gradebook_takes_hand_given_grades(tmp_path, out, capsys):
    """An autograded nbgrader course (kit_grades/ and gradebook.csv): the merge rewrites
    gradebook.csv with the nbgrader scores kept and the reports' points added."""
    course = tmp_path / "course"
    course.mkdir()
    out.rename(course / "kit_grades")
    nb = {"alice": {"part1-gemm": (1.0, 1.0)}, "bob": {"part1-gemm": (0.0, 1.0)},
          "carol": {"part1-gemm": (1.0, 1.0)}}
    write_gradebook(course, ["part1-gemm"], ["alice", "bob", "carol"], nb)
    bad = _csv(tmp_path, HEADER + "dave,report.quality,3,\n")
    assert gradebook_main(["--course", str(course), "--manual", str(bad)]) == 2
    assert "line 2: unknown student 'dave'" in capsys.readouterr().err
    good = _csv(tmp_path, HEADER + "carol,report.profiling_final,35,thorough\n")
    assert gradebook_main(["--course", str(course), "--manual", str(good)]) == 0
    with open(course / "gradebook.csv", newline="") as f:
        book = {r["student"]: r for r in csv.DictReader(f)}
    assert book["carol"]["nbgrader:part1-gemm"] == "1"
    assert book["carol"]["kit:report.profiling_final"] == "35"
    assert (book["carol"]["total"], book["carol"]["max_total"]) == ("46", "51")
    assert book["bob"]["kit:report.profiling_final"] == "" and book["bob"]["total"] == "0"


def test_a_name_chosen_as_another_students_id_takes_nothing(tmp_path):
    """Eve names her submission after Alice's report id: the CSV row giving Alice's id is
    refused as ambiguous, a row by Alice's name reaches Alice alone, and rows by a
    student's name and id are one student's (the duplicate is caught)."""
    reports = [{"name": "al ice", "id": "al_ice-b004096ab4"},
               {"name": "al_ice-b004096ab4", "id": "al_ice-b004-77e0c1d2aa"}]
    keys = manual.student_keys(reports)
    with pytest.raises(manual.ManualError, match="one submission's name and another's id"):
        manual.read_manual(_csv(tmp_path, HEADER + "al_ice-b004096ab4,report.quality,10,\n"),
                           CONFIG, keys)
    grades = manual.read_manual(_csv(tmp_path, HEADER + "al ice,report.quality,10,\n"),
                                CONFIG, keys)
    alice, eve = (manual.apply_manual({**r, "items": []}, grades, CONFIG) for r in reports)
    points = {r["name"]: next(i for i in r["items"] if i["id"] == "report.quality")["points"]
              for r in (alice, eve)}
    assert points == {"al ice": 10.0, "al_ice-b004096ab4": None}
    with pytest.raises(manual.ManualError, match="again"):
        manual.read_manual(_csv(tmp_path, HEADER + "al ice,report.quality,10,\n"
                                "al_ice-b004-77e0c1d2aa,report.quality,3,\n"
                                "al_ice-b004096ab4,report.quality,3,\n"), CONFIG,
                           {"al ice": "x", "al_ice-b004096ab4": "x"})


def test_a_name_a_spreadsheet_would_run_is_written_as_text_and_read_back(tmp_path):
    """Found by a red-team round: a submission named =HYPERLINK(...) became a live formula
    in grades.csv. It is written with a leading quote, and the manual marks and the
    course's gradebook read the name back as it was."""
    name = '=HYPERLINK("https://evil.example","see regrade")'
    out = tmp_path / "grades"
    book = Gradebook(out)
    for who, points in ((name, 0.0), ("-dash", 10.0), ("alice", 10.0)):
        book.add(_result(who, points))
    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["submission"] for r in rows} == {"'" + name, "'-dash", "alice"}
    assert not any(cell.startswith(("=", "+", "-", "@")) for r in rows for cell in r.values())
    marks = _csv(tmp_path, HEADER + "'-dash,report.quality,4,\n")
    grades = manual.read_manual(marks, CONFIG, manual.student_keys(Gradebook(out).reports()))
    assert [g.points for g in grades[next(iter(grades))].values()] == [4]
    course = tmp_path / "course"
    (course / "kit_grades").mkdir(parents=True)
    (course / "kit_grades" / "grades.csv").write_text((out / "grades.csv").read_text())
    with open(write_gradebook(course, [], [name, "-dash"], {}), newline="") as f:
        book_rows = {r["student"]: r for r in csv.DictReader(f)}
    assert set(book_rows) == {"'" + name, "'-dash"}
    assert book_rows["'-dash"]["kit_total"] == "10"


def test_csv_cells_give_back_every_name():
    from grader.reports.report import csv_cell, csv_value

    for name in ("=a", "'=a", "''x", "'plain", "plain", "-1", "@me", "\tx", ""):
        assert csv_value(csv_cell(name)) == name
    assert csv_cell("=a") != csv_cell("'=a")
