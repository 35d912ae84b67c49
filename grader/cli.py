"""`python -m grader [SUBMISSION ...]`: grade submission folders and write the reports.

With no folder named, grades the bundled examples: the solution, the starter and the
buggy submissions made from examples/bugs/ (--bugs DIR grades those described in DIR).
Each submission is a folder holding the student modules (gemm_1_naive.py, ...), as in
starter/, or a notebook whose code cells are tagged with their module (grader/nbextract.py).
A path that does not exist is graded zero with a message, and a folder holding no module
but sub-folders that do is graded as one submission per sub-folder (grader/submissions.py).

Reports are written as each submission finishes and merged with what --out already holds
(grader/reports/report.py). SIGINT or SIGTERM stops the run: no new job starts, every running job
is killed with all its processes, temporary folders are removed, and the grades of the
submissions finished so far stay written.
"""


from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from grader import examples, manual, safe_io
from grader.isolation import gpus, runner
from grader.parts import gemm as gemm_part
from grader.pipeline import (
    Interrupted,
    Stop,
    check_data,
    grade_all,
    references,
    write_class_reports,
    write_feedback,
)
from grader.reports import report
from grader.results import SubmissionResult
from grader.scoring import DEFAULT_CONFIG, Config, ConfigError, load_config
from grader.selection import Selection
from grader.submissions import Submission, holds_modules, resolve
from nnkit.backend import BackendError, select
from nnkit.gemm import BONUS_KERNELS, KERNELS
from nnkit.submission import KIT_ROOT, NAMED

EXAMPLES_DIR = KIT_ROOT / "build" / "examples"
NOTEBOOKS_DIR = KIT_ROOT / "build" / "notebooks"
PARTS = ("gemm", "net", "mpi")


def _submissions(args: argparse.Namespace) -> list[Submission]:
    if args.submissions or args.bugs:
        # The kit's own folders named as such ('starter' may be a student's link to their
        # work): followed; any other link is not (grader/submissions.py)
        paths = [NAMED[s].resolve() if s in NAMED else Path(s) for s in args.submissions]
        if args.bugs:
            paths += examples.materialize_all(KIT_ROOT / "build" / "bugs", args.bugs)
    else:
        paths = [NAMED["solution"].resolve(), NAMED["starter"].resolve(),
                 *examples.materialize_all(EXAMPLES_DIR)]
    return resolve(paths, NOTEBOOKS_DIR)

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
                        help="workers at a time in simulator mode; on GPUs, how many GPUs "
                             "to use (at most those visible)")
    parser.add_argument("--jobs-per-gpu", type=int, default=None,
                        help="on GPUs, workers sharing one GPU (default: three quarters of the "
                             "cores per GPU, 1 to 12); timed calls always have their GPU "
                             "alone")
    parser.add_argument("--seed", type=int, default=None,
                        help="the run's secret seed (default: drawn afresh); every case's "
                             "inputs derive from it, so a fixed seed reproduces a run")
    parser.add_argument("--function", default=None,
                        help="a quick check: grade only the item of this Part 2 or Part 3 "
                             "function and show only its checks (make check FUNCTION=...)")
    parser.add_argument("--details", action="store_true",
                        help="print every check of every item, not only the failures")
    parser.add_argument("--manual", type=Path, default=None,
                        help="an instructor's CSV of the items graded by hand (student,item,"
                             "points[,comment]; grader/manual.py), merged into every report")
    parser.add_argument("--manifest", type=Path, default=None,
                        help="refuse to grade if the kit differs from this manifest or from "
                             "git HEAD (python -m grader.isolation.integrity write FILE)")
    return parser


def _remeasure(parts: list[str], config: Config, workroot: Path, slots: gpus.GpuSlots,
               selection: Selection, before: dict) -> None:
    """For the grader's developers (GRADER_REMEASURE=1): time the references again once
    the class is graded and print how far they moved, to tell drift of the machine over a
    run from a difference between a reference's job and a submission's."""
    after = references(parts, config, workroot / "again", slots, selection)
    for gpu, ref in (before.get("gemm") or {}).items():
        for kernel, seconds in ref.seconds.items():
            again = after["gemm"][gpu].seconds[kernel]
            print(f"remeasure gpu {gpu} {kernel}: " + ", ".join(
                f"{b * 1e3:.3f} -> {a * 1e3:.3f} ms ({a / b:.3f})"
                for b, a in zip(seconds, again, strict=True)), file=sys.stderr)
    for gpu, seconds in (before.get("net_speed") or {}).items():
        again = after["net_speed"][gpu]
        print(f"remeasure gpu {gpu} net speed: {seconds:.4f} -> {again:.4f} s "
              f"({again / seconds:.3f})", file=sys.stderr)


def default_jobs_per_gpu(gpu_count: int) -> int:
    """Workers per GPU when --jobs-per-gpu is not given: three quarters of the cores each
    GPU gets, between 1 and 12. A job is mostly one busy core (Python, numba's compiler;
    measured: a job's CPU seconds are 0.95 of its wall time) and sometimes two or three
    (MPI ranks), and a timing window freezes every other job on its GPU, so the timed job
    has the CPU to itself as well. On one H100 with 16 cores, a class of 18 took 12.0 s a
    submission with 8 workers and 9.2 s with 12, its verdicts unchanged (2026-11-24)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return max(1, min(12, cores * 3 // (4 * max(gpu_count, 1))))


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
    try:
        selection = Selection(args.function, solution=NAMED["solution"].is_dir())
    except ValueError as err:
        parser.error(f"--function: {err} (GEMM kernels: --parts gemm --kernels naive)")
    if selection.part is not None:
        parts = [selection.part]
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    # A folder named `--out` in a class graded with `grader *` made the next student's
    # folder the reports' (red team): refuse an --out that is, or is in, a student's folder.
    out = Path(args.out).resolve()
    inside = [given for given in args.submissions if Path(given).resolve() in (out, *out.parents)]
    if inside or holds_modules(out):
        parser.error(f"--out {args.out} is, or is inside, the submission "
                     f"{inside[0] if inside else args.out}: the reports would be written "
                     "into a student's folder (a folder named like an option? put `--` "
                     "before the submissions)")
    if args.jobs_per_gpu is not None and args.jobs_per_gpu < 1:
        parser.error("--jobs-per-gpu must be at least 1")
    if importlib.util.find_spec("greenlet") is None:
        # Without it the workers' simulator would fall back to numba's own threads: slower
        # by far, and without the warp intrinsics a GPU has (grader/worker/blocksync.py).
        print("grader: the CUDA simulator (used in every run, on a GPU too for the version "
              "rule) needs the greenlet package: pip install 'greenlet>=3', or set the kit up "
              "from its pyproject.toml", file=sys.stderr)
        return 1
    if args.manifest is not None:  # before anything is graded (grader/isolation/integrity.py)
        from grader.isolation import integrity

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
        kernels = gemm_part.graded_kernels(config)
    elif any(k in BONUS_KERNELS for k in kernels) and not config.bonus:
        print("grader: grading the bonus kernel(s) --kernels names; a default run leaves "
              "them out unless [bonus] enabled = true or --bonus", file=sys.stderr)
    runner.reset()
    with Stop() as stop:
        return _grade(args, parts, kernels, config, backend, stop, selection)


def _grade(args: argparse.Namespace, parts: list[str], kernels: list[str], config: Config,
           backend, stop: Stop, selection: Selection) -> int:
    submissions = _submissions(args)
    book = report.Gradebook(args.out)
    grades = None
    if args.manual is not None:  # checked whole before anything is graded
        try:
            known = manual.student_keys([*book.rows.values(),
                                         *({"name": s.name, "id": report.safe_name(s.name)}
                                           for s in submissions)])
            grades = manual.read_manual(args.manual, config, known)
        except manual.ManualError as err:
            print(f"grader: --manual: {err}", file=sys.stderr)
            return 2
    for problem in check_data():
        print(f"grader: {problem}", file=sys.stderr)
    slots, jobs, where = None, args.jobs, ""
    if backend.on_gpu:
        ids = (gpus.visible_ids() or ["0"])[:args.jobs]
        per_gpu = args.jobs_per_gpu or default_jobs_per_gpu(len(ids))
        slots = gpus.GpuSlots(ids, per_gpu)
        jobs = slots.threads
        where = (f" x {len(ids)} GPU(s), {per_gpu} worker(s) each (timed calls alone on "
                 f"their GPU)")
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
            refs = references(parts, config, workroot, slots, selection)
            stop.unwind = False
        except (gemm_part.ReferenceError, RuntimeError) as err:
            print(f"grader: {safe_io.clean_text(err, 2000)}", file=sys.stderr)
            return 1
        except Interrupted:
            stop.unwind = False
        if stop.signum is None:
            results = grade_all(submissions, parts, kernels, config, backend, refs,
                                workroot, slots, jobs, book, stop, selection)
        if os.environ.get("GRADER_REMEASURE") and slots is not None and stop.signum is None:
            _remeasure(parts, config, workroot, slots, selection, refs)
    if grades is not None and stop.signum is None:
        write_feedback(manual.merge_into(book, grades, config), args.out)
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
