"""`python -m grader [SUBMISSION ...]`: grade submission folders and write the reports.

With no folder named, grades the bundled examples: the solution, the starter and the
buggy submissions made from examples/bugs/ (--bugs DIR grades those described in DIR).
Each submission is a folder holding the student modules (gemm_1_naive.py, ...), as in
starter/, or a notebook whose code cells are tagged with their module (grader/nbextract.py).
A path that does not exist is graded zero with a message, and a folder holding no module
but sub-folders that do is graded as one submission per sub-folder (grader/submissions.py).

Reports are written as each submission finishes and merged with what --out already holds
(grader/report.py). SIGINT or SIGTERM stops the run: no new job starts, every running job
is killed with all its processes, temporary folders are removed, and the grades of the
submissions finished so far stay written.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from grader import (
    examples,
    gpus,
    mpi_cases,
    net_cases,
    part1,
    part2,
    part3,
    report,
    runner,
    safe_io,
)
from grader.results import FAIL, NOT_GRADED, ItemResult, SubmissionResult
from grader.scoring import DEFAULT_CONFIG, Config, ConfigError, load_config
from grader.submissions import Submission, resolve
from nnkit.backend import BackendError, select
from nnkit.gemm import BONUS_KERNELS, KERNELS
from nnkit.progress import Progress
from nnkit.submission import KIT_ROOT, NAMED

EXAMPLES_DIR = KIT_ROOT / "build" / "examples"
NOTEBOOKS_DIR = KIT_ROOT / "build" / "notebooks"
PARTS = ("gemm", "net", "mpi")


def _submissions(args: argparse.Namespace) -> list[Submission]:
    if args.submissions or args.bugs:
        paths = [NAMED.get(s, Path(s)) for s in args.submissions]
        if args.bugs:
            paths += examples.materialize_all(KIT_ROOT / "build" / "bugs", args.bugs)
    else:
        paths = [NAMED["solution"], NAMED["starter"], *examples.materialize_all(EXAMPLES_DIR)]
    return resolve(paths, NOTEBOOKS_DIR)


@dataclass
class Task:
    """One worker run for one submission, and the items it decides."""

    name: str
    item_ids: list[str]
    run: Callable[[], list[ItemResult]]


def _safely(task: Task, config: Config,
            slots: gpus.GpuSlots | None = None) -> list[ItemResult] | None:
    """task.run() on a GPU of its own when there are slots, turning a failure of the grader
    itself into zero-point items that say so: one unreadable submission must never stop
    the grading of a class. None when the run is being stopped (SIGINT, SIGTERM)."""
    if runner.stopping():
        return None
    try:
        with slots.hold() if slots else nullcontext():
            items = task.run()
    except Exception as err:  # noqa: BLE001
        message = (f"the grader could not grade this ({type(err).__name__}: "
                   f"{safe_io.clean_text(err, 500)})")
        items = [ItemResult(i, config.title(i), config.points(i), 0.0, FAIL, message)
                 for i in task.item_ids]
    return None if runner.stopping() else items  # a job killed by the stop proves nothing


def _gemm_references(config: Config, workroot: Path,
                     slots: gpus.GpuSlots) -> dict[str, part1.Reference]:
    """The solution's and cuBLAS's times on every GPU, all GPUs at once."""
    print(f"Timing the solution and cuBLAS for reference on {len(slots.ids)} GPU(s) ...",
          file=sys.stderr)

    def measure(gpu: str) -> part1.Reference:
        with gpus.pinned(gpu):
            return part1.measure_reference(config, workroot / f"gpu{gpu}")

    with ThreadPoolExecutor(len(slots.ids)) as pool:
        return dict(zip(slots.ids, pool.map(measure, slots.ids), strict=True))


def _references(parts: list[str], config: Config, workroot: Path,
                slots: gpus.GpuSlots | None) -> dict:
    """What every submission is measured against, computed once per grading run."""
    on_gpu = slots is not None
    refs: dict = {"gemm": None, "net": None, "mpi": None}
    if "gemm" in parts and slots is not None:
        refs["gemm"] = _gemm_references(config, workroot, slots)
    if "net" in parts:
        plan = part2.training_plan(on_gpu)
        print(f"Training the CPU reference network: {plan.description} ...", file=sys.stderr)
        refs["net"] = part2.reference_or_error(on_gpu)
    if "mpi" in parts:
        print("Training the CPU reference for Part 3 (one process, and the serial model "
              "averaging) ...", file=sys.stderr)
        refs["mpi"] = part3.reference(config.secret)
    return refs


def _tasks(parts: list[str], kernels: list[str], folder: Path, workroot: Path, config: Config,
           on_gpu: bool, refs: dict) -> list[Task]:
    tasks = []
    if "gemm" in parts:
        for k in kernels:
            tasks.append(Task(f"gemm {k}", [f"gemm.{k}.correctness", f"gemm.{k}.performance"],
                              partial(_grade_kernel, k, folder, workroot, config, on_gpu,
                                      refs["gemm"])))
    if "net" in parts:
        tasks.append(Task("net functions", list(net_cases.ITEMS),
                          partial(part2.grade_units, folder, workroot, config, on_gpu)))
        tasks.append(Task("net training", ["net.agreement", "net.accuracy"],
                          partial(part2.grade_training, folder, workroot, config, on_gpu,
                                  refs["net"])))
    if "mpi" in parts:
        for item_id, kind in mpi_cases.ITEMS.items():
            tasks.append(Task(f"mpi {kind}", [item_id],
                              partial(part3.grade_item, item_id, folder, workroot, config,
                                      refs["mpi"])))
    return tasks


def _grade_kernel(kernel: str, folder: Path, workroot: Path, config: Config, on_gpu: bool,
                  per_gpu: dict[str, part1.Reference] | None) -> list[ItemResult]:
    """part1.grade_kernel against the references of the GPU this thread holds."""
    return part1.grade_kernel(kernel, folder, workroot, config, on_gpu,
                              gpus.for_current(per_gpu))


def write_feedback(results: list[dict], out: Path) -> None:
    """Per-submission feedback (Markdown, HTML, plots) and Gradescope results of these
    reports (dicts as report.Gradebook writes them); a failure here never costs the
    grades already written."""
    from grader import feedback, gradescope

    for result in results:
        try:
            feedback.write_feedback(result, out / "feedback")
            gradescope.write_gradescope(result, out / "gradescope" / f"{result['id']}.json")
        except Exception as err:  # noqa: BLE001 - the grades matter more than the reports
            print(f"grader: could not write the feedback of "
                  f"{report.display_name(result.get('name'))} ({type(err).__name__}: "
                  f"{safe_io.clean_text(err, 300)})", file=sys.stderr)


def write_class_reports(book: report.Gradebook, rebuild_all: bool = False) -> None:
    """The class summary from every report in the output folder, and the feedback of
    those that have none yet (of all of them with rebuild_all)."""
    from grader import summary

    reports = book.reports()
    feedback_dir = book.out / "feedback"
    missing = [r for r in reports if rebuild_all or not (feedback_dir / f"{r['id']}.html").exists()]
    write_feedback(missing, book.out)
    try:
        summary.write_summary(reports, feedback_dir)
    except Exception as err:  # noqa: BLE001
        print(f"grader: could not write the class summary ({type(err).__name__}: "
              f"{safe_io.clean_text(err, 300)})", file=sys.stderr)


def check_data(fix: bool = True) -> list[str]:
    """The MNIST folder jobs are given must be readable by their uids: make it so where
    the grader owns the files, and say what it cannot fix (as root only: otherwise jobs
    run as the grader's own user)."""
    from nnkit.fetch import open_to_all
    from nnkit.mnist import default_dir

    folder = default_dir()
    if os.geteuid() != 0 or not folder.is_dir():
        return []
    return open_to_all(folder, fix=fix)


class _Stop:
    """SIGINT and SIGTERM: kill every running job and start no other (runner.stop_all);
    during the references, which run in this thread, unwind at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.unwind = False
        self._old: dict[int, object] = {}

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._old[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, old in self._old.items():
            signal.signal(signum, old)

    def _handle(self, signum: int, frame: object) -> None:
        self.signum = signum
        runner.stop_all()
        if self.unwind:
            raise _Interrupted(signum)


class _Interrupted(Exception):
    pass


def with_secret(config: Config, seed: int | None) -> Config:
    """The config with the run's secret: `seed`, or drawn from the system's randomness."""
    return replace(config, secret=secrets.randbits(62) if seed is None else int(seed))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.splitlines()[0])
    parser.add_argument("submissions", nargs="*", help="folders (or 'solution', 'starter')")
    parser.add_argument("--bugs", type=Path, default=None,
                        help="also grade the buggy submissions described in this folder")
    parser.add_argument("--out", type=Path, default=Path("grades"),
                        help="where grades.csv and the JSON reports go (default: grades/)")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="points and limits")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated subset of " + ", ".join(PARTS))
    parser.add_argument("--kernels", default=None,
                        help="comma-separated subset of " + ", ".join(KERNELS) + " (default: "
                             "all but the bonus ones, unless the config's [bonus] or --bonus "
                             "turns them on; named here, they are graded)")
    parser.add_argument("--bonus", action="store_true",
                        help="grade the bonus items too, whatever the config's [bonus] says")
    parser.add_argument("--jobs", type=int, default=1,
                        help="workers at a time: CPU workers in simulator mode; on GPUs, at "
                             "most one per GPU, so that timings do not disturb each other")
    parser.add_argument("--seed", type=int, default=None,
                        help="the run's secret seed (default: drawn afresh); every case's "
                             "inputs derive from it, so a fixed seed reproduces a run")
    parser.add_argument("--details", action="store_true",
                        help="print every check of every item, not only the failures")
    parser.add_argument("--manifest", type=Path, default=None,
                        help="refuse to grade if the kit differs from this manifest or from "
                             "git HEAD (python -m grader.integrity write FILE)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    kernels = [k.strip() for k in (args.kernels or ",".join(KERNELS)).split(",") if k.strip()]
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown or not kernels:
        parser.error(f"--kernels: unknown {unknown}; choose from {', '.join(KERNELS)}")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or any(p not in PARTS for p in parts):
        parser.error(f"--parts: choose from {', '.join(PARTS)}")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.manifest is not None:  # before anything is graded (grader/integrity.py)
        from grader import integrity

        problems = integrity.verify(args.manifest)
        if problems:
            print(f"grader: {integrity.IntegrityError(problems)}", file=sys.stderr)
            return 1
    try:
        config = with_secret(load_config(args.config), args.seed)
        if args.bonus:
            config = replace(config, bonus=True)
        backend = select()
    except (ConfigError, BackendError) as err:
        parser.error(str(err))
    if args.kernels is None:  # the bonus kernels only where the config or --bonus asks
        kernels = part1.graded_kernels(config)
    elif any(k in BONUS_KERNELS for k in kernels) and not config.bonus:
        print("grader: grading the bonus kernel(s) --kernels names; a default run leaves "
              "them out unless [bonus] enabled = true or --bonus", file=sys.stderr)
    runner.reset()
    with _Stop() as stop:
        return _grade(args, parts, kernels, config, backend, stop)


def _grade(args: argparse.Namespace, parts: list[str], kernels: list[str], config: Config,
           backend, stop: _Stop) -> int:
    submissions = _submissions(args)
    book = report.Gradebook(args.out)
    for problem in check_data():
        print(f"grader: {problem}", file=sys.stderr)
    slots, jobs = None, args.jobs
    if backend.on_gpu:  # at most one worker per GPU
        ids = gpus.visible_ids() or ["0"]
        jobs = min(args.jobs, len(ids))
        slots = gpus.GpuSlots(ids[:jobs])
    where = f" x {jobs} GPUs, one worker each" if slots and jobs > 1 else ""
    print(f"Grading {len(submissions)} submission(s) on {backend.describe()}{where}",
          file=sys.stderr)
    for sub in submissions:
        if sub.problem:
            print(f"grader: {sub.problem}", file=sys.stderr)

    results: list[SubmissionResult] = []
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        workroot = Path(tmp)
        try:
            stop.unwind = True
            references = _references(parts, config, workroot, slots)
            stop.unwind = False
        except (part1.ReferenceError, RuntimeError) as err:
            print(f"grader: {safe_io.clean_text(err, 2000)}", file=sys.stderr)
            return 1
        except _Interrupted:
            stop.unwind = False
        if stop.signum is None:
            results = _grade_all(submissions, parts, kernels, config, backend, references,
                                 workroot, slots, jobs, book, stop)
    book.write_csv()  # also when nothing finished: the book as it stands
    if stop.signum is not None:
        print(f"grader: stopped by {signal.Signals(stop.signum).name}: every job killed; "
              f"{len(results)} submission(s) finished and written to {args.out}/",
              file=sys.stderr)
    write_class_reports(book)
    print(report.table(results, backend.describe()))
    lost = report.details(results) if args.details else report.failures(results)
    if lost:
        print("\n" + lost)
    for sub in submissions:
        for note in sub.notes + ([sub.problem] if sub.problem else []):
            print(f"note: {report.display_name(sub.name)}: {safe_io.one_line(note, 500)}")
    kept = len(book.rows) - len(book.fresh)
    print(f"\nReports in {args.out}/: grades.csv ({len(book.rows)} row(s)"
          + (f", {kept} from earlier runs, kept" if kept else "") + "), a JSON per "
          "submission, feedback/ (Markdown and HTML per submission, summary.html) and "
          "gradescope/ (results.json per submission)")
    if stop.signum is not None:
        return 128 + stop.signum
    return 1 if any(sub.problem for sub in submissions) else 0


def _zero(item_id: str, config: Config, on_gpu: bool, why: str) -> ItemResult:
    """An item of a submission with nothing to grade: zero, or not graded where this run
    grades it for nobody (speed without a GPU)."""
    if item_id.endswith(".performance") and not on_gpu:
        return ItemResult(item_id, config.title(item_id), config.points(item_id), None,
                          NOT_GRADED, "not graded (no GPU): performance is graded on a GPU "
                          f"only; and {why}")
    return ItemResult(item_id, config.title(item_id), config.points(item_id), 0.0, FAIL, why)


def _grade_all(submissions: list[Submission], parts: list[str], kernels: list[str],
               config: Config, backend, references: dict, workroot: Path,
               slots: gpus.GpuSlots | None, jobs: int, book: report.Gradebook,
               stop: _Stop) -> list[SubmissionResult]:
    """Every task of every submission; each submission's reports are written as soon as
    its last task is done. Returns the results of the submissions finished."""
    plan: dict[str, list[Task]] = {}
    for sub in submissions:
        plan[sub.name] = _tasks(parts, kernels, sub.folder or workroot / "missing",
                                workroot / report.safe_name(sub.name), config,
                                backend.on_gpu, references)
    items: dict[str, dict[str, list[ItemResult]]] = {sub.name: {} for sub in submissions}
    results: list[SubmissionResult] = []

    def finish(sub: Submission) -> None:
        result = SubmissionResult(sub.name, os.fsdecode(sub.folder or ""), backend.describe())
        for task in plan[sub.name]:
            result.items += items[sub.name][task.name]
        try:
            data = book.add(result, sub.notes)
        except OSError as err:  # a full disk, say: the others are still written
            print(f"grader: could not write the report of {report.display_name(sub.name)} "
                  f"({err})", file=sys.stderr)
            return
        write_feedback([data], book.out)
        results.append(result)

    todo = []
    for sub in submissions:
        if sub.problem and report.safe_name(sub.name) in book.rows:
            print(f"grader: {report.display_name(sub.name)}: its earlier report in "
                  f"{book.out}/ is kept ({sub.problem})", file=sys.stderr)
        elif sub.problem:  # nothing to grade: every item zero, with the reason
            for task in plan[sub.name]:
                items[sub.name][task.name] = [_zero(i, config, backend.on_gpu, sub.problem)
                                              for i in task.item_ids]
            finish(sub)
        else:
            todo += [(sub, task) for task in plan[sub.name]]
    by_name = {sub.name: sub for sub in submissions}
    with Progress(len(todo), "grading") as bar, ThreadPoolExecutor(jobs) as pool:
        futures: dict[Future, tuple[str, str]] = {
            pool.submit(_safely, task, config, slots): (sub.name, task.name)
            for sub, task in todo}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                name, task_name = futures[future]
                got = None if future.cancelled() else future.result()
                if got is None:
                    continue
                items[name][task_name] = got
                bar.update(f"{report.display_name(name)[:40]}: {task_name}")
                if len(items[name]) == len(plan[name]):  # none from a job the stop killed
                    finish(by_name[name])
            if stop.signum is not None:
                for future in pending:
                    future.cancel()
    return results


if __name__ == "__main__":
    sys.exit(main())
