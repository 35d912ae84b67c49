"""nbgrader test cells: what the gradebook holds, run in the sandbox, replayed here.
"""

from __future__ import annotations

import ast
import io
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grader import safe_io
from grader.isolation import gpus, runner
from grader.reports.locate import rewriter
from grader.worker.jobs import NotebookJob
from nnkit.checks import MODULES as FUNCTION_MODULES

COURSE_ID = "nnkit"
TEST_WORKER = "grader.worker.nbtests"  # the sandboxed half of a test cell


class CourseError(RuntimeError):
    """A course folder that cannot be released or graded as asked."""



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


def open_gradebook(course: Path) -> Any:
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID)


def check_cells(course: Path, assignment: str) -> list[CheckCell]:
    """The assignment's grade cells, from the gradebook (as released, hidden tests in)."""
    from nbgrader.api import MissingEntry

    cells = []
    with open_gradebook(course) as gb:
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


def _test_job(cells: list[CheckCell], submission: Path) -> NotebookJob:
    """The check() calls of all the cells, in order: what the job records."""
    return NotebookJob(submission=str(submission), checks=[
        {"function": c.function, "module": FUNCTION_MODULES[c.function], "cases": c.cases,
         "seed": c.seed} for cell in cells for c in cell.checks])


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


def kit_item(function: str) -> str | None:
    """The kit's item that grades `function`, one a test cell may check."""
    from grader.worker.net import FUNCTIONS
    from nnkit.gemm import KERNELS

    if function in FUNCTIONS:
        return FUNCTIONS[function][1]
    kernel = next((k for k, (_, f) in KERNELS.items() if f == function), None)
    return f"gemm.{kernel}.correctness" if kernel else None


def kit_failure(item: dict, function: str) -> str | None:
    """Why the kit's report item `item` says `function` is wrong, or None: the item was
    zeroed for breaking a rule, or a case of `function` failed (an item may grade several
    functions, each case labelled with its function's name: net.kernels); where no case
    names the function (GEMM's), the item's points decide."""
    if item.get("integrity"):
        return str(item["integrity"])
    rows = [r for r in item.get("checks") or [] if isinstance(r, dict)]
    mine = [r for r in rows if str(r.get("case", "")).split(" ")[0] == function]
    if mine:
        bad = next((r for r in mine if r.get("passed") is not True), None)
        return None if bad is None else f"{bad.get('case')}: {bad.get('message')}"
    points, most = item.get("points"), item.get("max_points")
    if isinstance(points, int | float) and isinstance(most, int | float) and points < most:
        return str(item.get("message"))
    return None


def gate_by_kit(results: dict[tuple[str, str], list[CellResult]], students: list[Student],
                cells: dict[str, list[CheckCell]], kit_grades: Path
                ) -> dict[tuple[str, str], list[CellResult]]:
    """The cells' results, with no points for a cell whose function the kit's grader (its
    reports in kit_grades/) found wrong: the kit's item runs every defence and more
    cases on the same function, a cell's check() a few. A function the kit zeroed for
    breaking a rule, or whose cases failed there (a launcher can tell the kit's cases
    from a cell's, and cheat on the cell's alone), earns no cell points either."""
    from grader.reports.report import safe_name

    gated = {}
    for (name, assignment), row in results.items():
        try:
            report = safe_io.read_json(kit_grades / f"{safe_name(name)}.json", 16 << 20)
            items = {i.get("id"): i for i in report.get("items", []) if isinstance(i, dict)}
        except (OSError, ValueError, AttributeError):
            items = {}
        out = []
        for cell, result in zip(cells[assignment], row, strict=True):
            why = None
            for check in cell.checks:
                item = items.get(kit_item(check.function))
                failure = kit_failure(item, check.function) if item is not None else None
                if failure:
                    why = f"the kit's grading of {item.get('id')} failed: {failure}"
                    break
            out.append(result if why is None or not result.points else
                       CellResult(0.0, result.output, why))
        gated[name, assignment] = out
    return gated


@dataclass(eq=False)
class Student:
    name: str
    folder: Path  # the extracted modules
    notebooks: dict[str, Path] = field(default_factory=dict)  # assignment -> submitted
    problem: str | None = None  # why nothing could be extracted
    notes: list[str] = field(default_factory=list)  # what extraction found to tell
    empty: list[str] = field(default_factory=list)  # notebooks with no graded cell




def grade_check_cells(students: list[Student], cells: dict[str, list[CheckCell]],
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

    def run(s: Student, assignment: str) -> runner.WorkerRun:
        workdir = workroot / s.name / assignment
        copy = runner.copy_submission(s.folder, workdir / "submission")
        job = _test_job(cells[assignment], copy)
        with slots.hold() if slots else nullcontext():
            return runner.run_worker(job, workdir, timeout * len(cells[assignment]), on_gpu,
                                     module=TEST_WORKER)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        runs = dict(zip(todo, pool.map(lambda t: run(*t), todo), strict=True))
    results: dict[tuple[str, str], list[CellResult]] = {}
    for s in students:
        # What the cells print names the student's notebook cells, not the job's files.
        fix = rewriter([workroot], s.folder)
        for assignment in s.notebooks:
            job, first, row = runs.get((s, assignment)), 0, []
            for cell in cells[assignment]:
                if job is None:
                    row.append(replay_cell(cell, None, f"no module: {s.problem}"))
                else:
                    stopped = job.stop_reason(timeout * len(cells[assignment]))
                    row.append(replay_cell(cell, job.outdir, stopped, first))
                first += len(cell.checks)
            results[s.name, assignment] = [
                CellResult(r.points, fix(r.output), None if r.error is None else fix(r.error))
                for r in row]
    return results
