"""`python -m grader [SUBMISSION ...]`: grade submission folders and write the reports.

With no folder named, grades the bundled examples: the solution, the starter and the
buggy submissions made from examples/bugs/ (--bugs DIR grades those described in DIR).
Each submission is a folder holding the student modules (gemm_1_naive.py, ...), as in
starter/, or a notebook whose code cells are tagged with their module (grader/nbextract.py).
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from grader import examples, gpus, mpi_cases, net_cases, part1, part2, part3, report
from grader.results import FAIL, ItemResult, SubmissionResult
from grader.scoring import DEFAULT_CONFIG, Config, ConfigError, load_config
from nnkit.backend import BackendError, select
from nnkit.gemm import KERNELS
from nnkit.progress import Progress
from nnkit.submission import KIT_ROOT, NAMED

EXAMPLES_DIR = KIT_ROOT / "build" / "examples"
PARTS = ("gemm", "net", "mpi")


def _submissions(args: argparse.Namespace) -> list[tuple[str, Path]]:
    if args.submissions or args.bugs:
        folders = [NAMED.get(s, Path(s)) for s in args.submissions]
        if args.bugs:
            folders += examples.materialize_all(KIT_ROOT / "build" / "bugs", args.bugs)
    else:
        folders = [NAMED["solution"], NAMED["starter"], *examples.materialize_all(EXAMPLES_DIR)]
    folders = [_from_notebook(f) if f.suffix == ".ipynb" else f for f in folders]
    named, seen = [], set()
    for folder in folders:
        if not folder.is_dir():
            raise SystemExit(f"grader: {folder}: not a folder")
        name = folder.resolve().name
        while name in seen:  # two folders with one name: keep both reports
            name += "_"
        seen.add(name)
        named.append((name, folder.resolve()))
    return named


def _from_notebook(path: Path) -> Path:
    """A notebook submission becomes the folder of modules its tagged cells hold; one that
    cannot be read becomes an empty folder, graded zero with 'missing module' messages."""
    from grader import nbextract

    # A folder of its own per notebook: two students' hw.ipynb must not share one.
    parent = KIT_ROOT / "build" / "notebooks"
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{path.stem}-", dir=parent)) / path.stem
    try:
        nbextract.extract([path], folder)
    except Exception as err:  # noqa: BLE001 - any broken notebook; the class goes on
        folder.mkdir(parents=True, exist_ok=True)
        print(f"grader: {path}: no modules extracted ({type(err).__name__}: {err})",
              file=sys.stderr)
    return folder


@dataclass
class Task:
    """One worker run for one submission, and the items it decides."""

    name: str
    item_ids: list[str]
    run: Callable[[], list[ItemResult]]


def _safely(task: Task, config: Config, slots: gpus.GpuSlots | None = None) -> list[ItemResult]:
    """task.run() on a GPU of its own when there are slots, turning a failure of the grader
    itself into zero-point items that say so: one unreadable submission must never stop
    the grading of a class."""
    try:
        with slots.hold() if slots else nullcontext():
            return task.run()
    except Exception as err:  # noqa: BLE001
        message = f"the grader could not grade this ({type(err).__name__}: {err})"
        return [ItemResult(i, config.title(i), config.points(i), 0.0, FAIL, message)
                for i in task.item_ids]


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


def write_feedback(results: list[SubmissionResult], out: Path) -> None:
    """Per-submission feedback (Markdown, HTML, plots), Gradescope results and the class
    summary, beside grades.csv; a failure here never costs the grades already written."""
    from grader import feedback, gradescope, summary

    data = [r.to_json() for r in results]
    try:
        for result in data:
            feedback.write_feedback(result, out / "feedback")
            gradescope.write_gradescope(result, out / "gradescope" / f"{result['name']}.json")
        summary.write_summary(data, out / "feedback")
    except Exception as err:  # noqa: BLE001 - the grades matter more than the reports
        print(f"grader: could not write the feedback reports ({type(err).__name__}: {err})",
              file=sys.stderr)


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
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help="comma-separated subset of " + ", ".join(KERNELS))
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
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
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
        backend = select()
    except (ConfigError, BackendError) as err:
        parser.error(str(err))
    submissions = _submissions(args)
    args.out.mkdir(parents=True, exist_ok=True)
    slots, jobs = None, args.jobs
    if backend.on_gpu:  # at most one worker per GPU
        ids = gpus.visible_ids() or ["0"]
        jobs = min(args.jobs, len(ids))
        slots = gpus.GpuSlots(ids[:jobs])
    where = f" x {jobs} GPUs, one worker each" if slots and jobs > 1 else ""
    print(f"Grading {len(submissions)} submission(s) on {backend.describe()}{where}",
          file=sys.stderr)

    results: list[SubmissionResult] = []
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        workroot = Path(tmp)
        try:
            references = _references(parts, config, workroot, slots)
        except (part1.ReferenceError, RuntimeError) as err:
            print(f"grader: {err}", file=sys.stderr)
            return 1
        tasks = [(name, task) for name, folder in submissions
                 for task in _tasks(parts, kernels, folder, workroot / name, config,
                                    backend.on_gpu, references)]
        items: dict[tuple[str, str], list] = {}
        with Progress(len(tasks), "grading") as bar, ThreadPoolExecutor(jobs) as pool:
            futures = {pool.submit(_safely, task, config, slots): (name, task.name)
                       for name, task in tasks}
            for future in as_completed(futures):
                name, task_name = futures[future]
                items[name, task_name] = future.result()
                bar.update(f"{name}: {task_name}")
    for name, folder in submissions:
        result = SubmissionResult(name, str(folder), backend.describe())
        for owner, task in tasks:
            if owner == name:
                result.items += items[name, task.name]
        report.write_json(result, args.out / f"{name}.json")
        results.append(result)
    report.write_csv(results, args.out / "grades.csv")
    write_feedback(results, args.out)
    print(report.table(results, backend.describe()))
    lost = report.details(results) if args.details else report.failures(results)
    if lost:
        print("\n" + lost)
    print(f"\nReports in {args.out}/: grades.csv, a JSON per submission, feedback/ (Markdown "
          "and HTML per submission, summary.html) and gradescope/ (results.json per "
          "submission)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
