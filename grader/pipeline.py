"""The grading run's stages, wired: the references every submission is measured against,
one task per worker run (a GEMM kernel, the network's functions or training, an MPI
item), the tasks of a class on a pool of threads (one GPU each where there are GPUs), and
each submission's reports written as soon as its last task is done. grader/cli.py is the
command line around it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from grader import safe_io
from grader.cases import mpi as mpi_cases
from grader.cases import mpi_combined
from grader.cases import net as net_cases
from grader.isolation import gpus, runner
from grader.parts import gemm as gemm_part
from grader.parts import gemm_speed
from grader.parts import mpi as mpi_part
from grader.parts import mpi_combined as mpi_combined_part
from grader.parts import net as net_part
from grader.reports import locate, report
from grader.results import FAIL, NOT_GRADED, ItemResult, SubmissionResult
from grader.scoring import Config
from grader.selection import EVERYTHING, Selection
from grader.submissions import Submission
from nnkit.progress import Progress


@dataclass
class Task:
    """One worker run for one submission, and the items it decides."""

    name: str
    item_ids: list[str]
    run: Callable[[], list[ItemResult]]
    holds_gpu: bool = True  # False: the task takes a GPU itself, when it needs one


def safely(task: Task, config: Config,
           slots: gpus.GpuSlots | None = None) -> list[ItemResult] | None:
    """task.run() on a GPU of its own when there are slots, turning a failure of the grader
    itself into zero-point items that say so: one unreadable submission must never stop
    the grading of a class. None when the run is being stopped (SIGINT, SIGTERM)."""
    if runner.stopping():
        return None
    try:
        with slots.hold() if slots and task.holds_gpu else nullcontext():
            items = task.run()
    except Exception as err:  # noqa: BLE001
        message = (f"the grader could not grade this ({type(err).__name__}: "
                   f"{safe_io.clean_text(err, 500)})")
        items = [ItemResult(i, config.title(i), config.points(i), 0.0, FAIL, message)
                 for i in task.item_ids]
    return None if runner.stopping() else items  # a job killed by the stop proves nothing


def gemm_references(config: Config, workroot: Path,
                    slots: gpus.GpuSlots) -> dict[str, gemm_part.Reference]:
    """The solution's and cuBLAS's times on every GPU, all GPUs at once."""
    print(f"Timing the solution and cuBLAS for reference on {len(slots.ids)} GPU(s) ...",
          file=sys.stderr)

    def measure(gpu: str) -> gemm_part.Reference:
        with gpus.pinned(gpu):
            return gemm_part.measure_reference(config, workroot / f"gpu{gpu}")

    with ThreadPoolExecutor(len(slots.ids)) as pool:
        return dict(zip(slots.ids, pool.map(measure, slots.ids), strict=True))


def net_speed_references(config: Config, workroot: Path, slots: gpus.GpuSlots,
                         reference: net_part.ReferenceTraining) -> dict[str, float]:
    """The solution network's fastest epoch on every GPU, all GPUs at once."""
    print(f"Timing the solution's network for reference on {len(slots.ids)} GPU(s) ...",
          file=sys.stderr)

    def measure(gpu: str) -> float:
        with gpus.pinned(gpu):
            return net_part.measure_speed_reference(config, workroot / f"gpu{gpu}", reference)

    with ThreadPoolExecutor(len(slots.ids)) as pool:
        return dict(zip(slots.ids, pool.map(measure, slots.ids), strict=True))


def references(parts: list[str], config: Config, workroot: Path,
               slots: gpus.GpuSlots | None, selection: Selection = EVERYTHING) -> dict:
    """What every submission is measured against, computed once per grading run: only
    what the selected items need."""
    on_gpu = slots is not None
    refs: dict = {"gemm": None, "net": None, "net_speed": None, "mpi": None}
    parts = [p for p in parts if selection.needs_reference(p)]
    if "gemm" in parts and slots is not None and selection.solution:
        refs["gemm"] = gemm_references(config, workroot, slots)
    if "net" in parts:
        plan = net_part.training_plan(on_gpu)
        print(f"Training the CPU reference network: {plan.description} ...", file=sys.stderr)
        refs["net"] = net_part.reference_or_error(on_gpu)
        if (slots is not None and selection.solution
                and refs["net"].plan.data["source"] != net_part.dataset.SAMPLE):
            refs["net_speed"] = net_speed_references(config, workroot, slots, refs["net"])
    if "mpi" in parts:
        print("Training the CPU reference for Part 3 (one process, and the serial model "
              "averaging) ...", file=sys.stderr)
        refs["mpi"] = mpi_part.reference(config.secret)
    return refs


def tasks(parts: list[str], kernels: list[str], folder: Path, workroot: Path, config: Config,
          on_gpu: bool, refs: dict, slots: gpus.GpuSlots | None = None,
          selection: Selection = EVERYTHING) -> list[Task]:
    """The tasks of one submission; with a selection that narrows the run, only those
    deciding its items, each keeping only what the selection shows."""
    found = every_task(parts, kernels, folder, workroot, config, on_gpu, refs, slots,
                       one_mpi_job=selection.item is None)
    if selection == EVERYTHING:
        return found
    if selection.item is not None:
        found = [replace(t, item_ids=[selection.item]) for t in found
                 if selection.item in t.item_ids]
    return [replace(t, run=lambda run=t.run: selection.keep(run(), on_gpu)) for t in found]


def every_task(parts: list[str], kernels: list[str], folder: Path, workroot: Path,
               config: Config, on_gpu: bool, refs: dict,
               slots: gpus.GpuSlots | None, one_mpi_job: bool = True) -> list[Task]:
    """Every task of one submission. one_mpi_job: Part 3's items of mpi_part.TOGETHER in
    one MPI job (grader/parts/mpi.py grade_items), else a job each."""
    found = []
    if "gemm" in parts and refs["gemm"] and kernels:
        # On a GPU: the correctness tasks first, then one timed task for the kernels
        # that passed (waiting for their verdicts, the GPU to itself while it times).
        verdicts = gemm_speed.Verdicts(kernels)
        for k in kernels:
            found.append(Task(f"gemm {k}", [f"gemm.{k}.correctness"],
                              partial(grade_kernel, k, folder, workroot, config, on_gpu,
                                      None, verdicts)))
        found.append(Task("gemm speed", [f"gemm.{k}.performance" for k in kernels],
                          partial(gemm_speed.grade_speed, kernels, folder, workroot, config,
                                  refs["gemm"], verdicts, slots), holds_gpu=False))
    elif "gemm" in parts:
        for k in kernels:
            found.append(Task(f"gemm {k}", [f"gemm.{k}.correctness", f"gemm.{k}.performance"],
                              partial(grade_kernel, k, folder, workroot, config, on_gpu,
                                      refs["gemm"])))
    if "net" in parts:
        found.append(Task("net functions", list(net_cases.ITEMS),
                          partial(net_part.grade_units, folder, workroot, config, on_gpu)))
        found.append(Task("net training", ["net.agreement", "net.accuracy", "net.performance"],
                          partial(net_part.grade_training, folder, workroot, config, on_gpu,
                                  refs["net"], refs.get("net_speed"))))
    if "mpi" in parts:
        together = mpi_part.TOGETHER if one_mpi_job else []
        if together:
            found.append(Task("mpi items", list(together),
                              partial(mpi_part.grade_items, list(together), folder,
                                      workroot, config, refs["mpi"])))
        for item_id, kind in mpi_cases.ITEMS.items():
            if item_id not in together:
                found.append(Task(f"mpi {kind}", [item_id],
                                  partial(mpi_part.grade_item, item_id, folder, workroot,
                                          config, refs["mpi"])))
        if mpi_combined.ITEM in config.items:  # a config of before the item grades without it
            found.append(Task("mpi combined", [mpi_combined.ITEM],
                              partial(mpi_combined_part.grade_combined, folder, workroot,
                                      config, on_gpu)))
    return found


def grade_kernel(kernel: str, folder: Path, workroot: Path, config: Config, on_gpu: bool,
                 per_gpu: dict[str, gemm_part.Reference] | None,
                 verdicts: gemm_speed.Verdicts | None = None) -> list[ItemResult]:
    """gemm_part.grade_kernel against the references of the GPU this thread holds."""
    return gemm_part.grade_kernel(kernel, folder, workroot, config, on_gpu,
                                  gpus.for_current(per_gpu), verdicts)


def in_order(planned: list[Task], got: dict[str, list[ItemResult]]) -> list[ItemResult]:
    """The items of a submission's tasks, each kernel's speed item after its correctness
    item, Part 3's in the order of grader/cases/mpi.py (whichever job graded them); an
    item a later task gives again (a correctness item the timed task failed) replaces the
    first in its place."""
    by_id: dict[str, ItemResult] = {}
    for task in planned:
        for item in got.get(task.name, []):
            by_id[item.id] = item
    planned_ids = [i for task in planned for i in task.item_ids]
    order = sorted(planned_ids, key=lambda i: (_kernel_rank(i, planned_ids),
                                               planned_ids.index(i)))
    return [by_id[i] for i in order if i in by_id] + [
        item for i, item in by_id.items() if i not in order]


MPI_ORDER = [*mpi_cases.ITEMS, mpi_combined.ITEM]


def _kernel_rank(item_id: str, order: list[str]) -> float:
    """GEMM items sort by the position of the kernel's correctness item, Part 3's by the
    position of the first of them planned and their order in MPI_ORDER."""
    if item_id in MPI_ORDER:
        first = min(order.index(i) for i in order if i in MPI_ORDER)
        return first + MPI_ORDER.index(item_id) / len(MPI_ORDER)
    parts = item_id.split(".")
    if len(parts) == 3 and parts[0] == "gemm":
        first = f"gemm.{parts[1]}.correctness"
        if first in order:
            return order.index(first)
    return order.index(item_id)


def write_feedback(results: list[dict], out: Path) -> None:
    """Per-submission feedback (Markdown, HTML, plots) and Gradescope results of these
    reports (dicts as report.Gradebook writes them); a failure here never costs the
    grades already written."""
    for result in results:
        # Gradescope's file first (it carries the grades), each in its own guard with its
        # own import: a library the feedback needs (matplotlib, Jinja2) missing from the
        # grading machine costs the feedback, not the grades.
        for what in ("Gradescope results", "feedback"):
            try:
                if what == "feedback":
                    from grader.reports import feedback

                    feedback.write_feedback(result, out / "feedback")
                else:
                    from grader.reports import gradescope

                    gradescope.write_gradescope(result,
                                                out / "gradescope" / f"{result['id']}.json")
            except Exception as err:  # noqa: BLE001 - the grades matter more than reports
                print(f"grader: could not write the {what} of "
                      f"{report.display_name(result.get('name'))} ({type(err).__name__}: "
                      f"{safe_io.clean_text(err, 300)})", file=sys.stderr)


def write_class_reports(book: report.Gradebook, rebuild_all: bool = False) -> None:
    """The class summary from every report in the output folder, and the feedback of
    those that have none yet (of all of them with rebuild_all)."""
    from grader.reports import summary

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


class Stop:
    """SIGINT and SIGTERM: kill every running job and start no other (runner.stop_all);
    during the references, which run in this thread, unwind at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.unwind = False
        self._old: dict[int, object] = {}

    def __enter__(self) -> Stop:
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
            raise Interrupted(signum)


class Interrupted(Exception):
    pass


def nothing_to_grade(item_id: str, config: Config, on_gpu: bool, why: str) -> ItemResult:
    """An item of a submission with nothing to grade: zero, or not graded where this run
    grades it for nobody (speed without a GPU)."""
    if item_id.endswith(".performance") and not on_gpu:
        return ItemResult(item_id, config.title(item_id), config.points(item_id), None,
                          NOT_GRADED, "not graded (no GPU): performance is graded on a GPU "
                          f"only; and {why}")
    return ItemResult(item_id, config.title(item_id), config.points(item_id), 0.0, FAIL, why)


def grade_all(submissions: list[Submission], parts: list[str], kernels: list[str],
              config: Config, backend, references: dict, workroot: Path,
              slots: gpus.GpuSlots | None, jobs: int, book: report.Gradebook,
              stop: Stop, selection: Selection = EVERYTHING) -> list[SubmissionResult]:
    """Every task of every submission; each submission's reports are written as soon as
    its last task is done. Returns the results of the submissions finished."""
    plan: dict[str, list[Task]] = {}
    for sub in submissions:
        plan[sub.name] = tasks(parts, kernels, sub.folder or workroot / "missing",
                               workroot / report.safe_name(sub.name), config,
                               backend.on_gpu, references, slots, selection)
    items: dict[str, dict[str, list[ItemResult]]] = {sub.name: {} for sub in submissions}
    results: list[SubmissionResult] = []

    def finish(sub: Submission) -> None:
        result = SubmissionResult(sub.name, os.fsdecode(sub.report_path or ""),
                                  backend.describe())
        result.items = in_order(plan[sub.name], items[sub.name])
        # Messages name files relative to the submission, notebook cells where it was one.
        try:
            locate.relocate(result, [workroot, *filter(None, [sub.folder])],
                            sub.folder if sub.cell_map else None)
        except Exception as err:  # noqa: BLE001 - the messages as they were, not a lost class
            print(f"grader: {report.display_name(sub.name)}: messages not rewritten "
                  f"({type(err).__name__}: {safe_io.clean_text(err, 200)})", file=sys.stderr)
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
                items[sub.name][task.name] = [
                    nothing_to_grade(i, config, backend.on_gpu, sub.problem)
                    for i in task.item_ids]
            finish(sub)
        else:
            todo += [(sub, task) for task in plan[sub.name]]
    by_name = {sub.name: sub for sub in submissions}
    # On GPUs, room for the timed tasks that wait (holding no GPU) for their correctness
    # tasks beside the `jobs` that work: the GPU slots still bound what runs at once.
    threads = 2 * jobs if slots else jobs
    with Progress(len(todo), "grading") as bar, ThreadPoolExecutor(threads) as pool:
        futures: dict[Future, tuple[str, str]] = {
            pool.submit(safely, task, config, slots): (sub.name, task.name)
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
