"""Messages as the student reads them (grader/reports/locate.py, grader/cellmap.py): no
path of the grader's temporary folders, no private package name, and the lines of a
notebook's modules given as the notebook's cells."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader import cellmap
from grader.course.notebook import ASSIGNMENTS, build_notebook, write_notebook
from grader.nbextract import extract
from grader.reports.locate import path_stripper, relocate, rewriter
from grader.results import FAIL, ItemResult, SubmissionResult
from tests.conftest import KIT_ROOT, run_kit

WORK = Path("/tmp/grader-k2x9q1ab")
PART1 = next(a for a in ASSIGNMENTS if a.name == "part1-gemm")


@pytest.mark.parametrize("text, shown", [
    (f"{WORK}/alice/naive/submission/gemm_1_naive.py: missing (expected module "
     "gemm_1_naive.py)", "gemm_1_naive.py: missing (expected module gemm_1_naive.py)"),
    (f'File "../../..{WORK}/alice/naive/submission/gemm_2_shared.py", line 20:',
     'File "gemm_2_shared.py", line 20:'),
    (f"open('{WORK}/alice/naive/out/case-0.npz')", "open('…/out/case-0.npz')"),
    ("/home/t/subs/alice/gemm_1_naive.py, line 3", "gemm_1_naive.py, line 3"),
    # Unrelated text stays as it is: another folder that starts alike, a ratio, a name.
    ("/home/t/subs/alice2/x.py float32/float64 grader-k2x9q1abc",
     "/home/t/subs/alice2/x.py float32/float64 grader-k2x9q1abc"),
])
def test_paths_under_the_roots_are_shortened(text, shown):
    assert path_stripper([WORK, Path("/home/t/subs/alice")])(text) == shown


def test_private_package_name_is_dropped():
    fix = rewriter([WORK], None)
    assert fix("No module named '_nnkit_impl_f9897f711a33.net_1_kernels'") == \
        "No module named 'net_1_kernels'"


def _notebook(tmp_path: Path, edit: tuple[str, str] | None = None) -> Path:
    """Part 1's notebook with the naive module only, a scratch cell and blank lines at the
    top of the kernel's cell (which extraction cuts), and an edit of the kernel's cell."""
    notebook = build_notebook(PART1, modules=("gemm_1_naive",))
    cells = notebook["cells"]
    kernel = next(c for c in cells if c["id"] == "gemm_1_naive-1")
    kernel["source"] = "\n\n" + kernel["source"]
    if edit:
        kernel["source"] = kernel["source"].replace(*edit)
    scratch = {"cell_type": "code", "id": "scratch", "metadata": {}, "outputs": [],
               "execution_count": None, "source": "x = 1\n"}
    cells.insert(cells.index(kernel), scratch)
    return write_notebook(notebook, tmp_path / "alice.ipynb")


def test_every_module_line_maps_to_the_same_text_in_its_cell(tmp_path):
    path = _notebook(tmp_path)
    extract([path], tmp_path / "alice")
    spans = cellmap.read(tmp_path / "alice", {"gemm_1_naive"})["gemm_1_naive"]
    cells = json.loads(path.read_text())["cells"]
    module = (tmp_path / "alice" / "gemm_1_naive.py").read_text().splitlines()
    mapped = 0
    for number, text in enumerate(module, 1):
        found = cellmap.locate(spans, number)
        if found is None:  # the two blank lines between cells
            assert text == ""
            continue
        span, line = found
        assert cells[span.cell - 1]["source"].splitlines()[line - 1] == text
        mapped += 1
    assert mapped == len(module) - 2 * (len(spans) - 1)
    kernel = next(s for s in spans if s.defines == "gemm_naive_kernel")
    assert (kernel.cell, kernel.cell_id, kernel.skipped) == (7, "gemm_1_naive-1", 2)


def test_a_map_that_does_not_describe_the_module_is_ignored(tmp_path):
    path = _notebook(tmp_path)
    extract([path], tmp_path / "alice")
    module = tmp_path / "alice" / "gemm_1_naive.py"
    module.write_text(module.read_text() + "# edited after extraction\n")
    assert cellmap.read(tmp_path / "alice", {"gemm_1_naive"}) == {}


def test_a_map_inside_a_handed_in_folder_is_not_read(tmp_path):
    """A student who hands in a folder cannot supply a map: it is read only from beside
    the folder, where the grader's extraction writes it."""
    path = _notebook(tmp_path)
    extract([path], tmp_path / "x" / "alice")
    folder = tmp_path / "bob"
    folder.mkdir()
    (folder / "gemm_1_naive.py").write_bytes((tmp_path / "x" / "alice" / "gemm_1_naive.py")
                                            .read_bytes())
    (folder / "alice.notebook.json").write_bytes(cellmap.path_for(tmp_path / "x" / "alice")
                                              .read_bytes())
    assert cellmap.read(folder, {"gemm_1_naive"}) == {}
    assert cellmap.read(tmp_path / "x" / "alice", {"gemm_1_naive"})


def test_a_map_a_student_puts_beside_a_sub_folder_is_not_read(tmp_path):
    """A handed-in folder of sub-folders is graded as one submission per sub-folder: the
    records the student placed beside them are neither its notes nor its cell map, and a
    malformed span is refused rather than trusted."""
    import json

    from grader.submissions import resolve

    path = _notebook(tmp_path)
    extract([path], tmp_path / "x" / "a")
    eve = tmp_path / "eve"
    for name in ("a", "b"):
        (eve / name).mkdir(parents=True)
        (eve / name / "gemm_1_naive.py").write_bytes(
            (tmp_path / "x" / "a" / "gemm_1_naive.py").read_bytes())
    record = json.loads(cellmap.path_for(tmp_path / "x" / "a").read_text())
    record["notes"], record["problem"] = ["forged note"], "keep my earlier report"
    for spans in (e["spans"] for e in record["modules"].values()):
        spans[0]["first"] = "1"  # not a number: comparing it would raise
    cellmap.path_for(eve / "a").write_text(json.dumps(record))
    subs = {s.name: s for s in resolve([eve], tmp_path / "nb")}
    assert not subs["a"].cell_map and subs["a"].problem is None
    assert "forged note" not in subs["a"].notes
    assert cellmap.read(eve / "a", {"gemm_1_naive"}) == {}  # the malformed span refused


def test_relocate_rewrites_messages_checks_and_figures(tmp_path):
    path = _notebook(tmp_path)
    extract([path], tmp_path / "alice")
    lines = (tmp_path / "alice" / "gemm_1_naive.py").read_text().splitlines()
    n = next(i for i, t in enumerate(lines, 1) if "j, i = cuda.grid(2)" in t)
    where = f"gemm_1_naive.py, line {n}"
    item = ItemResult("gemm.naive.correctness", "t", 10, 0.0, FAIL,
                      f"raised ValueError: x ({WORK}/a/naive/submission/{where}: j, i = ...)",
                      checks=[{"case": "c", "message": f"gemm_1_naive.py:{n}: race on C"}],
                      figures={"policy": [f"{where}: X.copy_to_host"]})
    result = SubmissionResult("alice", str(tmp_path / "alice"), "sim", [item])
    relocate(result, [WORK], tmp_path / "alice")
    cell = next(c for c in json.loads(path.read_text())["cells"] if c["id"] == "gemm_1_naive-1")
    m = cell["source"].splitlines().index(lines[n - 1]) + 1
    shown = f"cell 7 of alice.ipynb [gemm_naive_kernel, id gemm_1_naive-1], line {m}"
    assert item.message == f"raised ValueError: x ({shown}: j, i = ...)"
    assert item.checks[0]["message"] == f"{shown}: race on C"
    assert item.figures["policy"] == [f"{shown}: X.copy_to_host"]


def test_grading_names_cells_of_a_notebook_and_no_temporary_path(tmp_path):
    """A notebook whose kernel raises: the message points at the cell and its line. A
    folder missing its module: the message names the module, not the grader's copy."""
    path = _notebook(tmp_path, ("    j, i = cuda.grid(2)\n",
                                "    j, i = cuda.grid(2)\n    raise ValueError('boom')\n"))
    missing = tmp_path / "carol"
    missing.mkdir()
    (missing / "notes.txt").write_text("no module here\n")
    out = tmp_path / "grades"
    done = run_kit("grader", str(path), str(missing), "--parts", "gemm", "--kernels",
                   "naive", "--seed", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    alice = (out / "alice.json").read_text()
    assert "cell 7 of alice.ipynb [gemm_naive_kernel, id gemm_1_naive-1], line" in alice
    assert "raise ValueError('boom')" in alice and "gemm_1_naive.py, line" not in alice
    carol = json.loads((out / "carol.json").read_text())["items"][0]["message"]
    assert "SubmissionError: gemm_1_naive.py: missing" in carol
    for report in out.rglob("*"):
        if report.is_file() and report.suffix in (".json", ".md", ".html", ".csv"):
            assert "/grader-" not in report.read_text(), report


def test_test_cell_errors_name_the_notebook_cell(tmp_path):
    """nbgrader's test cells, graded by the kit (grader/course/testcells.py): what the cell
    shows in the autograded notebook points at the student's cell, not the job's copy."""
    from grader.course.testcells import CheckCall, CheckCell, Student, grade_check_cells

    path = _notebook(tmp_path, ("    j, i = cuda.grid(2)\n",
                                "    j, i = cuda.grid(2)\n    raise ValueError('boom')\n"))
    student = Student("alice", tmp_path / "extracted" / "alice", {"part1-gemm": path})
    extract([path], student.folder)
    cell = CheckCell("part1-gemm", "test-gemm_naive", 1.0, 'check("gemm_naive", gemm_naive)',
                     (CheckCall("gemm_naive", None),))
    work = tmp_path / "work"
    work.mkdir()
    [result] = grade_check_cells([student], {"part1-gemm": [cell]}, 60, 1, work)[
        "alice", "part1-gemm"]
    assert result.points == 0 and "boom" in result.error
    assert "cell 7 of alice.ipynb [gemm_naive_kernel, id gemm_1_naive-1], line" in result.error
    assert "gemm_1_naive.py" not in result.error and str(work) not in result.error


def test_a_record_this_installation_did_not_sign_is_ignored(tmp_path):
    """A student who hands in a file named `<classmate>.notebook.json` beside the
    classmate's folder wrote the classmate's record, and its problem zeroed them (red
    team). Records carry this installation's signature; any other is read as none."""
    alice = tmp_path / "alice"
    alice.mkdir()
    forged = {"modules": {}, "notes": ["cheating detected"],
              "problem": "alice: PLAGIARISM DETECTED, graded zero"}
    cellmap.path_for(alice).write_text(json.dumps(forged))
    assert cellmap.read_notes(alice) == ([], None)
    cellmap.path_for(alice).write_text(json.dumps({**forged, "signature": "0" * 64}))
    assert cellmap.read_notes(alice) == ([], None)
    cellmap.write(alice, {}, ["a note of the grader's"], "no graded cell")
    assert cellmap.read_notes(alice) == (["a note of the grader's"], "no graded cell")


def test_a_cell_of_many_decorators_is_read_in_linear_time():
    """The first definition of a cell was found by a pattern that backtracked on
    decorator lines: a 120 KB notebook held a class's run for minutes, in the grader's
    own process (red team). 200,000 such lines now take a fraction of a second; the old
    pattern would not finish within the test's limit."""
    code = ("from grader import cellmap\n"
            "spans = cellmap.spans_of([('@x\\n' * 200000, 'n.ipynb', 1, '')])\n"
            "named = cellmap.spans_of([('@dec\\n@other(1)\\nasync def f():\\n  pass', "
            "'n.ipynb', 1, '')])\n"
            "print(len(spans), repr(spans[0].defines), named[0].defines)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=KIT_ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout.split() == ["1", "''", "f"]
