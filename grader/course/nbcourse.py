"""An nbgrader course made from the kit: release the notebooks, autograde a class, one
gradebook.

    python -m grader.course.nbcourse release   [--course DIR] [--assignments a,b] [--modules m,...]
    python -m grader.course.nbcourse sample-class [--course DIR]
    python -m grader.course.nbcourse autograde [--course DIR] [--jobs N] [--allow-uncommitted]

`release` writes DIR/source/<part>/<part>.ipynb for each part (grader/course/notebook.py) and the
course's nbgrader_config.py, runs `nbgrader generate_assignment` (DIR/release/ holds what
students get: stubs, visible checks; no solution, no hidden checks) and writes the kit's
manifest, DIR/kit_manifest.json (grader/isolation/integrity.py).

`autograde` never executes a notebook, and never runs `nbgrader autograde`, which would
run every cell of every submission in a kernel of the grader's own user. First it checks
that the kit is the one released (the manifest, and git HEAD in a git checkout). Then, for
the submissions in DIR/submitted/<student>/<part>/ (put there by `nbgrader collect`,
`zip_collect` or by hand), it extracts the tagged cells of every student's notebooks into
DIR/extracted/<student>/ (grader/nbextract.py: scratch cells are dropped unread), and
grades those folders with the kit's sandboxed grader into DIR/kit_grades/. nbgrader's
own test cells are graded by the kit too: a sandboxed job per notebook
(grader/worker/nbtests.py) only records what the student's functions did on the cells'
cases; this process replays the recordings through the same checks and writes the
points into nbgrader's gradebook (DIR/gradebook.db), where formgrader and `nbgrader
export` find them, with the autograded notebooks in DIR/autograded/. Both sets of scores
go into DIR/gradebook.csv, a row per student.

Only the notebooks' tagged cells are ever run, and only in the sandbox; test cells come
from the gradebook (what was released), never from a submitted notebook.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, redirect_stdout
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from grader import examples, safe_io
from grader.course.notebook import ASSIGNMENTS, Assignment, build_notebook, write_notebook
from grader.isolation import gpus, integrity, runner, sandbox
from grader.nbextract import NotebookError, extract
from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config
from nnkit.checks import MODULES as FUNCTION_MODULES
from nnkit.gemm import KERNELS
from nnkit.submission import KIT_ROOT

DEFAULT_COURSE = KIT_ROOT / "build" / "course"
COURSE_ID = "nnkit"
STATE = "nnkit_course.json"  # what `release` built, for `autograde` to grade alike
PART_OF = {"part1-gemm": "gemm", "part2-network": "net"}  # assignment -> grader --parts
SAMPLE_BUG = "naive_beta_ignored"  # the buggy student of the sample class
TEST_WORKER = "grader.worker.nbtests"  # the sandboxed half of a test cell

CONFIG = """\
# Written by `python -m grader.course.nbcourse release`; rewritten on every release.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "{course_id}"
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
# Submissions are graded by `make autograde` (python -m grader.course.nbcourse autograde), which
# runs the students' code in the kit's sandbox only. `nbgrader autograde` would run every
# cell of every notebook, unconfined, as whoever starts it: it is given a kernel that does
# not exist, so that it fails before any cell runs.
c.Execute.kernel_name = "nnkit-use-make-autograde"
"""


class CourseError(RuntimeError):
    """A course folder that cannot be released or graded as asked."""


def _nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run an nbgrader command in the course folder (release only: nothing here executes a
    notebook). check=False: a failure is returned, not raised."""
    def path(*first: str, var: str) -> str:
        return os.pathsep.join(p for p in (*first, os.environ.get(var, "")) if p)

    # nbgrader runs `alembic` from PATH: the one beside this interpreter, venv or not.
    env = {**os.environ, "PYTHONPATH": path(str(KIT_ROOT), var="PYTHONPATH"),
           "PATH": path(str(Path(sys.executable).parent), var="PATH")}
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                            capture_output=True, text=True)
    if check and result.returncode != 0:
        raise CourseError(f"nbgrader {' '.join(args)} failed:\n{result.stderr[-4000:]}")
    return result


def _chosen(names: list[str] | None) -> list[Assignment]:
    known = {a.name: a for a in ASSIGNMENTS}
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise CourseError(f"unknown assignment(s) {unknown}; known: {', '.join(known)}")
    return [known[n] for n in names] if names else list(ASSIGNMENTS)


def release(course: Path = DEFAULT_COURSE, assignments: list[str] | None = None,
            modules: list[str] | None = None, timeout: int = 120) -> list[Path]:
    """Build source/, run `nbgrader generate_assignment` and write the kit's manifest;
    returns the released notebooks. `modules` keeps only those modules of each part (for
    quick trials); `timeout`: seconds a test cell may run at autograde."""
    chosen = _chosen(assignments)
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(CONFIG.format(course_id=COURSE_ID))
    released, state = [], {"assignments": {}, "timeout": timeout}
    for assignment in chosen:
        keep = tuple(m for m in assignment.modules if modules is None or m in modules)
        if not keep:
            continue
        source = course / "source" / assignment.name
        if source.exists():
            shutil.rmtree(source)  # no stale file survives a release
        write_notebook(build_notebook(assignment, modules=keep),
                       source / f"{assignment.name}.ipynb")
        _nbgrader(course, "generate_assignment", assignment.name, "--force")
        released.append(course / "release" / assignment.name / f"{assignment.name}.ipynb")
        state["assignments"][assignment.name] = list(keep)
    (course / STATE).write_text(json.dumps(state, indent=1))
    integrity.write(course / integrity.COURSE_MANIFEST)
    changes = integrity.git_changes()
    if changes:  # released all the same (a kit in development), but autograde will refuse
        print("release: the kit differs from git HEAD, and `make autograde` will refuse to "
              "grade until it does not (or is given --allow-uncommitted):\n  "
              + "\n  ".join(changes), file=sys.stderr)
    return released


def _state(course: Path) -> dict:
    try:
        state = json.loads((course / STATE).read_text())
        state["assignments"]  # noqa: B018 - a release wrote it
        return state
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CourseError(f"{course}: no release found (run `make release` first)") from err


# -- the sample class -------------------------------------------------------------------

def _filled(released: dict, source: dict, edit: dict | None = None) -> dict:
    """The released notebook with the source's code in every module cell: what a student
    who wrote the solution (with `edit` applied, if given) would hand in."""
    by_id = {c["id"]: c for c in source["cells"]}
    notebook = json.loads(json.dumps(released))
    for cell in notebook["cells"]:
        if "nnkit" in cell["metadata"] and cell["id"] in by_id:
            cell["source"] = by_id[cell["id"]]["source"]
            if edit and cell["metadata"]["nnkit"]["module"] + ".py" == edit["file"]:
                cell["source"] = cell["source"].replace(edit["old"], edit["new"])
    return notebook


def sample_class(course: Path = DEFAULT_COURSE) -> dict[str, str]:
    """Submissions of three students: alice hands in the solution, bob the untouched
    release (plus a module file of his own, which must be ignored), carol the solution with
    the bug examples/bugs/naive_beta_ignored.toml. Returns student -> what they handed in."""
    bug = examples.load_spec(examples.BUG_DIR / f"{SAMPLE_BUG}.toml").edits[0]
    for assignment in _state(course)["assignments"]:
        released = json.loads((course / "release" / assignment / f"{assignment}.ipynb")
                              .read_text())
        source = json.loads((course / "source" / assignment / f"{assignment}.ipynb")
                            .read_text())
        for student, notebook in (("alice", _filled(released, source)), ("bob", released),
                                  ("carol", _filled(released, source, bug))):
            folder = course / "submitted" / student / assignment
            if folder.exists():
                shutil.rmtree(folder)
            write_notebook(notebook, folder / f"{assignment}.ipynb")
            if student == "bob" and assignment == "part1-gemm":
                (folder / "gemm_1_naive.py").write_text("# bob's own copy, never graded\n")
    return {"alice": "solution", "bob": "starter", "carol": SAMPLE_BUG}


# -- test cells: what the gradebook holds, run in the sandbox, replayed here ------------

@dataclass(frozen=True)
class CheckCall:
    """One `check(function, function, cases, seed)` statement of a test cell."""

    function: str
    cases: list | None
    seed: int = 0


@dataclass(frozen=True)
class CheckCell:
    """An nbgrader grade cell of the kit's kind: check() calls worth `points`."""

    notebook: str
    grade_id: str
    points: float
    source: str
    checks: tuple[CheckCall, ...]


@dataclass
class CellResult:
    points: float
    output: str  # what the cell printed, as a notebook would show it
    error: str | None = None  # why it failed; None when it passed


def parse_test_cell(source: str) -> tuple[CheckCall, ...]:
    """The check() calls of a test cell; CourseError for anything else (the kit grades
    cells of its own kind only: it never runs a cell's code)."""
    def literal(node: ast.expr) -> Any:
        try:
            return ast.literal_eval(node)
        except ValueError:
            raise CourseError(f"test cell: {ast.unparse(node)} is not a literal") from None

    calls = []
    for stmt in ast.parse(source).body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "check" and 2 <= len(call.args) <= 4):
            raise CourseError(f"test cell: {ast.unparse(stmt)!r} is not a check(name, "
                              "function[, cases[, seed]]) call")
        name, fn = literal(call.args[0]), call.args[1]
        if name not in FUNCTION_MODULES or not (isinstance(fn, ast.Name) and fn.id == name):
            raise CourseError(f"test cell: {ast.unparse(call)!r} does not check a student "
                              "function under its own name")
        extra = dict(zip(("cases", "seed"), call.args[2:], strict=False))
        extra.update({k.arg: k.value for k in call.keywords if k.arg in ("cases", "seed")})
        if len(extra) != len(call.args[2:]) + len(call.keywords):
            raise CourseError(f"test cell: {ast.unparse(call)!r}: unknown arguments")
        cases = literal(extra["cases"]) if "cases" in extra else None
        calls.append(CheckCall(name, cases, int(literal(extra.get("seed", ast.Constant(0))))))
    return tuple(calls)


def _gradebook(course: Path) -> Any:
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID)


def check_cells(course: Path, assignment: str) -> list[CheckCell]:
    """The assignment's grade cells, from the gradebook (as released, hidden tests in)."""
    from nbgrader.api import MissingEntry

    cells = []
    with _gradebook(course) as gb:
        try:
            record = gb.find_assignment(assignment)
        except MissingEntry as err:
            raise CourseError(f"{assignment}: not in the gradebook (run `make release`)") from err
        for notebook in record.notebooks:
            for cell in notebook.grade_cells:
                source = gb.find_source_cell(cell.name, notebook.name, assignment).source
                if cell.cell_type != "code":
                    raise CourseError(f"{assignment}/{cell.name}: a {cell.cell_type} grade "
                                      "cell; the kit grades check() cells only")
                cells.append(CheckCell(notebook.name, cell.name, float(cell.max_score), source,
                                      parse_test_cell(source)))
    return cells


def _test_job(cells: list[CheckCell]) -> dict:
    """The check() calls of all the cells, in order: what the job records."""
    return {"checks": [{"function": c.function, "module": FUNCTION_MODULES[c.function],
                        "cases": c.cases, "seed": c.seed} for cell in cells for c in cell.checks]}


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or (
        hasattr(value, "shape") and (hasattr(value, "copy_to_host") or hasattr(value, "get")))


def _put(dst: Any, value: np.ndarray) -> None:
    """Write a recorded array into an array of this process (NumPy, numba's or CuPy)."""
    if tuple(dst.shape) != value.shape:
        raise AssertionError(f"an array of shape {tuple(dst.shape)} came back as {value.shape}")
    try:
        value = value.astype(dst.dtype, casting="same_kind")
    except TypeError as err:
        raise AssertionError(f"an array came back as {value.dtype} ({err})") from None
    if hasattr(dst, "get") and not isinstance(dst, np.ndarray):  # CuPy
        import cupy

        dst[...] = cupy.asarray(value)
    else:
        dst[...] = value


def _build(tree: Any, arrays: Any) -> Any:
    if tree is None:
        return None
    if "array" in tree:
        return np.array(arrays[tree["array"]])
    items = [_build(t, arrays) for t in tree["seq"]]
    return tuple(items) if tree.get("tuple") else items


def _restore(arg: Any, tree: Any, arrays: Any) -> None:
    """Give an argument the state the student's function left it in."""
    if tree is None:
        return
    if "array" in tree:
        if _is_array(arg):
            _put(arg, arrays[tree["array"]])
    elif isinstance(arg, (list, tuple)) and len(arg) == len(tree["seq"]):
        for item, sub in zip(arg, tree["seq"], strict=True):
            _restore(item, sub, arrays)
    elif isinstance(arg, list):  # the function resized the list
        arg[:] = _build(tree, arrays)


class _NotRun(AssertionError):
    pass


class Replay:
    """Stands in for the student's function in this process: each call takes the state
    and the result of the same call in the job (call-C-N.* of grader/worker/nbtests.py)."""

    def __init__(self, outdir: Path, check: int, stopped: str, kernels: bool = True):
        """kernels: the function must launch kernels of the submission (every function
        the notebooks check does: GEMM launchers and the network's kernels)."""
        self.outdir, self.check, self.stopped, self.calls = outdir, check, stopped, 0
        self.kernels = kernels

    def __call__(self, *args: Any) -> Any:
        name = f"call-{self.check}-{self.calls}"
        self.calls += 1
        error = self.outdir / f"{name}.err"
        if error.is_file():
            raise _NotRun(safe_io.read_text(error, 2000))
        meta = self.outdir / f"{name}.json"
        if not meta.is_file():
            raise _NotRun(f"no result for this case ({self.stopped})")
        try:
            tree = safe_io.read_json(meta, 4 << 20)
            if self.kernels and not tree.get("own_launches"):
                raise _NotRun("the call launched none of the submission's kernels: the "
                              "result must be computed by your own kernels on the device")
            with np.load(self.outdir / f"{name}.npz", allow_pickle=False) as arrays:
                for arg, sub in zip(args, tree["args"], strict=False):
                    _restore(arg, sub, arrays)
                return _build(tree["result"], arrays)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise _NotRun(f"an unreadable result ({type(err).__name__}: {err})") from None


def replay_cell(cell: CheckCell, outdir: Path | None, stopped: str, first: int = 0
                ) -> CellResult:
    """Run the cell's checks here, the student's function replayed from the job's
    recordings in outdir (None: there was no job); the cell's first check() is the job's
    number `first`. Points only when every check passes."""
    from nnkit.checks import check

    printed = io.StringIO()
    for number, call in enumerate(cell.checks, start=first):
        load_error = outdir / f"load-{number}.err" if outdir else None
        if outdir is None or load_error.is_file():
            why = safe_io.read_text(load_error, 2000) if outdir else stopped
            error = f"{FUNCTION_MODULES[call.function]}.py could not be loaded: {why}"
            return CellResult(0.0, printed.getvalue(), error)
        cases = None if call.cases is None else [tuple(c) for c in call.cases]
        try:
            with redirect_stdout(printed):
                check(call.function, Replay(outdir, number, stopped), cases, call.seed)
        except Exception as err:  # noqa: BLE001 - a failing check is the cell's result
            kind = "" if isinstance(err, AssertionError) else f"{type(err).__name__}: "
            return CellResult(0.0, printed.getvalue(), f"{kind}{err}")
    return CellResult(cell.points, printed.getvalue())


# -- autograding ------------------------------------------------------------------------

def _students(course: Path) -> list[str]:
    submitted = course / "submitted"
    return sorted(p.name for p in submitted.iterdir() if p.is_dir()) if submitted.is_dir() else []


def _grader_args(assignments: dict[str, list[str]]) -> list[str]:
    """--parts (and --kernels) matching what was released."""
    parts = [PART_OF[a] for a in assignments]
    args = ["--parts", ",".join(parts)]
    if "gemm" in parts:
        modules = assignments["part1-gemm"]
        args += ["--kernels", ",".join(k for k, (m, _) in KERNELS.items() if m in modules)]
    return args


def _close_course(course: Path) -> None:
    """As root, without a mount namespace, jobs are kept out by their uid alone: take
    other users' access to the course (solutions in source/, hidden tests in the
    gradebook, every submission) away. Its owner and group keep theirs."""
    info = course.stat()
    if os.geteuid() == 0 and info.st_mode & 0o007:
        course.chmod(info.st_mode & ~0o007)


@dataclass(eq=False)
class _Student:
    name: str
    folder: Path  # the extracted modules
    notebooks: dict[str, Path] = field(default_factory=dict)  # assignment -> submitted
    problem: str | None = None  # why nothing could be extracted


def _extract_all(course: Path, assignments: list[str]) -> list[_Student]:
    extracted = course / "extracted"
    if extracted.exists():
        shutil.rmtree(extracted)
    students = []
    for name in _students(course):
        student = _Student(name, extracted / name)
        student.folder.mkdir(parents=True)
        student.notebooks = {a: nb for a in assignments
                             if (nb := course / "submitted" / name / a / f"{a}.ipynb").is_file()}
        try:
            # A link could name any file the grader may read (another student's notebook,
            # source/ with its solutions): never followed.
            linked = [nb for nb in student.notebooks.values()
                      if any(p.is_symlink() for p in (nb, nb.parent, nb.parent.parent))]
            if linked:
                raise NotebookError(f"{linked[0]}: a symbolic link, not read")
            extract(list(student.notebooks.values()), student.folder)
        except NotebookError as err:  # graded as an empty folder: every item says why
            student.problem = str(err)
            for module in student.folder.iterdir():
                module.unlink()
        students.append(student)
    return students


def grade_check_cells(students: list[_Student], cells: dict[str, list[CheckCell]],
                      timeout: float, jobs: int, workroot: Path
                      ) -> dict[tuple[str, str], list[CellResult]]:
    """(student, assignment) -> a result per test cell, for every submitted notebook. One
    sandboxed job per notebook records every cell's calls, in order, as a kernel would run
    them (`timeout` seconds a cell; a cell left unfinished fails, and so do those after
    it); this process replays them and decides."""
    from nnkit.backend import select

    on_gpu = select().on_gpu
    slots = gpus.GpuSlots((gpus.visible_ids() or ["0"])[:jobs]) if on_gpu else None
    todo = [(s, a) for s in students for a in s.notebooks if not s.problem]

    def run(s: _Student, assignment: str) -> runner.WorkerRun:
        workdir = workroot / s.name / assignment
        copy = runner.copy_submission(s.folder, workdir / "submission")
        job = {**_test_job(cells[assignment]), "submission": str(copy)}
        with slots.hold() if slots else nullcontext():
            return runner.run_worker(job, workdir, timeout * len(cells[assignment]), on_gpu,
                                     module=TEST_WORKER)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        runs = dict(zip(todo, pool.map(lambda t: run(*t), todo), strict=True))
    results: dict[tuple[str, str], list[CellResult]] = {}
    for s in students:
        for assignment in s.notebooks:
            job, first, row = runs.get((s, assignment)), 0, []
            for cell in cells[assignment]:
                if job is None:
                    row.append(replay_cell(cell, None, f"no module: {s.problem}"))
                else:
                    stopped = job.stop_reason(timeout * len(cells[assignment]))
                    row.append(replay_cell(cell, job.outdir, stopped, first))
                first += len(cell.checks)
            results[s.name, assignment] = row
    return results


def _timestamp(folder: Path) -> dict:
    """nbgrader's submission time, when the submission carries one."""
    stamp = folder / "timestamp.txt"
    return {"timestamp": stamp.read_text().strip()} if stamp.is_file() else {}


def save_scores(course: Path, students: list[_Student], assignments: list[str],
                cells: dict[str, list[CheckCell]],
                results: dict[tuple[str, str], list[CellResult]]
                ) -> dict[str, dict[str, tuple[float, float]]]:
    """Write the test cells' points into nbgrader's gradebook, as `nbgrader autograde`
    would have; returns student -> assignment -> (score, max_score) read back from it."""
    from nbgrader.api import InvalidEntry
    from sqlalchemy.exc import SAWarning

    scores: dict[str, dict[str, tuple[float, float]]] = {}
    # nbgrader's add_submission makes SQLAlchemy warn about its own autoflush; noise.
    with _gradebook(course) as gb, warnings.catch_warnings():
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


def _autograded(submitted: Path, cells: list[CheckCell], results: list[CellResult]) -> dict:
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


def autograde(course: Path = DEFAULT_COURSE, jobs: int = 1, *,
              allow_uncommitted: bool = False, config: Path = DEFAULT_CONFIG) -> Path:
    """Grade every submission, nbgrader's test cells and the kit's items alike; returns the
    gradebook's path. Refuses (integrity.IntegrityError) a kit that differs from the
    release's manifest or, unless allow_uncommitted, from git HEAD."""
    integrity.require(course / integrity.COURSE_MANIFEST, git=not allow_uncommitted)
    state = _state(course)
    assignments: dict[str, list[str]] = state["assignments"]
    timeout = float(state.get("timeout", 120))
    try:
        load_config(config)  # the sandbox's settings, for the test cells' jobs
    except ConfigError as err:
        raise CourseError(str(err)) from err
    _close_course(course)
    cells = {a: check_cells(course, a) for a in assignments}
    students = _extract_all(course, list(assignments))
    if not students:
        raise CourseError(f"{course}/submitted/ holds no student folder")

    start = time.perf_counter()
    settings = sandbox.current()
    # Jobs never see the course, wherever it is (a uid of their own keeps them out of it
    # too, as root; not as root, they run as the grader's user).
    sandbox.use(replace(settings, hide=(*settings.hide, str(course))))
    try:
        with tempfile.TemporaryDirectory(prefix="nbcourse-") as tmp:
            results = grade_check_cells(students, cells, timeout, jobs, Path(tmp))
    finally:
        sandbox.use(settings)
    nb_scores = save_scores(course, students, list(assignments), cells, results)
    autograded = course / "autograded"
    for s in students:
        for assignment, submitted in s.notebooks.items():
            folder = autograded / s.name / assignment
            if folder.exists():
                shutil.rmtree(folder)
            if s.problem:
                continue  # nothing was read: its zero is in the gradebook
            try:
                notebook = _autograded(submitted, cells[assignment], results[s.name, assignment])
            except (OSError, ValueError, AttributeError, TypeError):
                continue  # not a notebook: its zero is in the gradebook
            write_notebook(notebook, folder / submitted.name)
    print(f"test cells, in the sandbox: {time.perf_counter() - start:.1f} s for "
          f"{len(students)} student(s)", file=sys.stderr)

    out = course / "kit_grades"
    start = time.perf_counter()
    # Run from the course folder: the sandbox hides the grader's working folder from jobs.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(KIT_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    argv = [sys.executable, "-P", "-m", "grader", *(str(s.folder) for s in students),
            "--out", str(out), "--jobs", str(jobs), "--config", str(Path(config).resolve()),
            *_grader_args(assignments)]
    result = subprocess.run(argv, cwd=course, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise CourseError(f"the kit's grader failed:\n{result.stderr[-4000:]}")
    print(result.stdout)
    print(f"the kit's grader: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    for s in students:
        if s.problem:
            print(f"{s.name}: {s.problem}", file=sys.stderr)
    return write_gradebook(course, list(assignments), [s.name for s in students], nb_scores)


def write_gradebook(course: Path, assignments: list[str], students: list[str],
                    nb: dict[str, dict[str, tuple[float, float]]]) -> Path:
    """DIR/gradebook.csv: nbgrader's score per assignment, the kit's items, the totals."""
    with open(course / "kit_grades" / "grades.csv", newline="") as f:
        kit = {row["submission"]: row for row in csv.DictReader(f)}
    # The kit's grades.csv also names each submission's report id and grading date.
    items = [k for k in next(iter(kit.values()), {}) if k not in (
        "submission", "id", "graded", "total", "max_total")]
    header = ["student"]
    for a in assignments:
        header += [f"nbgrader:{a}", f"nbgrader:{a}:max"]
    header += ["nbgrader_total", "nbgrader_max", *(f"kit:{i}" for i in items), "kit_total",
               "kit_max", "total", "max_total"]
    path = course / "gradebook.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for student in students:
            scores = [nb.get(student, {}).get(a, (0.0, 0.0)) for a in assignments]
            nb_total, nb_max = sum(s for s, _ in scores), sum(m for _, m in scores)
            row = kit.get(student, {})
            kit_total, kit_max = float(row.get("total") or 0), float(row.get("max_total") or 0)
            writer.writerow([student, *[f"{x:g}" for pair in scores for x in pair],
                             f"{nb_total:g}", f"{nb_max:g}", *(row.get(i, "") for i in items),
                             f"{kit_total:g}", f"{kit_max:g}", f"{nb_total + kit_total:g}",
                             f"{nb_max + kit_max:g}"])
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.course.nbcourse",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["release", "sample-class", "autograde"])
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE)
    parser.add_argument("--assignments", default=None,
                        help="release: comma-separated subset of "
                             + ", ".join(a.name for a in ASSIGNMENTS))
    parser.add_argument("--modules", default=None,
                        help="release: keep only these modules (a quick trial course)")
    parser.add_argument("--timeout", type=int, default=120,
                        help="release: seconds a test cell may run at autograde")
    parser.add_argument("--jobs", type=int, default=1, help="autograde: jobs at a time")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG,
                        help="autograde: the kit grader's points, limits and sandbox")
    parser.add_argument("--allow-uncommitted", action="store_true",
                        help="autograde: compare the kit with the release's manifest only, "
                             "not with git HEAD (a kit in development)")
    args = parser.parse_args(argv)

    def split(text: str | None) -> list[str] | None:
        return [x.strip() for x in text.split(",") if x.strip()] if text else None

    course = args.course.resolve()
    try:
        if args.command == "release":
            for path in release(course, split(args.assignments), split(args.modules),
                                args.timeout):
                print(f"released {path}", file=sys.stderr)
        elif args.command == "sample-class":
            for student, what in sample_class(course).items():
                print(f"{student}: {what}", file=sys.stderr)
        else:
            gradebook = autograde(course, args.jobs, allow_uncommitted=args.allow_uncommitted,
                                  config=args.config)
            print(f"gradebook: {gradebook}", file=sys.stderr)
    except (CourseError, integrity.IntegrityError) as err:
        print(f"grader.course.nbcourse: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
