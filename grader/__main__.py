"""`python -m grader [SUBMISSION ...]`: grade submission folders and write the reports.

With no folder named, grades the bundled examples: the solution, the starter and the
buggy submissions made from examples/bugs/. Each submission is a folder holding the
student modules (gemm_1_naive.py, ...), as in starter/.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from grader import examples, part1, report
from grader.results import SubmissionResult
from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config
from nnkit.backend import BackendError, select
from nnkit.gemm import KERNELS
from nnkit.progress import Progress
from nnkit.submission import KIT_ROOT, NAMED

EXAMPLES_DIR = KIT_ROOT / "build" / "examples"


def _submissions(args: argparse.Namespace) -> list[tuple[str, Path]]:
    if args.submissions:
        folders = [NAMED.get(s, Path(s)) for s in args.submissions]
    else:
        folders = [NAMED["solution"], NAMED["starter"], *examples.materialize_all(EXAMPLES_DIR)]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.splitlines()[0])
    parser.add_argument("submissions", nargs="*", help="folders (or 'solution', 'starter')")
    parser.add_argument("--out", type=Path, default=Path("grades"),
                        help="where grades.csv and the JSON reports go (default: grades/)")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="points and limits")
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help="comma-separated subset of " + ", ".join(KERNELS))
    parser.add_argument("--jobs", type=int, default=1,
                        help="workers at a time in simulator mode (on a GPU, one at a time "
                             "so that timings do not disturb each other)")
    parser.add_argument("--details", action="store_true",
                        help="print every check of every item, not only the failures")
    args = parser.parse_args(argv)
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown or not kernels:
        parser.error(f"--kernels: unknown {unknown}; choose from {', '.join(KERNELS)}")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    try:
        config = load_config(args.config)
        backend = select()
    except (ConfigError, BackendError) as err:
        parser.error(str(err))
    submissions = _submissions(args)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"Grading {len(submissions)} submission(s) on {backend.describe()}", file=sys.stderr)

    results: list[SubmissionResult] = []
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        workroot = Path(tmp)
        reference = None
        if backend.on_gpu:
            print("Timing the solution and cuBLAS for reference ...", file=sys.stderr)
            try:
                reference = part1.measure_reference(config, workroot)
            except part1.ReferenceError as err:
                print(f"grader: {err}", file=sys.stderr)
                return 1
        jobs = 1 if backend.on_gpu else args.jobs
        tasks = [(name, folder, kernel) for name, folder in submissions for kernel in kernels]
        items: dict[tuple[str, str], list] = {}
        with Progress(len(tasks), "grading") as bar, ThreadPoolExecutor(jobs) as pool:
            futures = {
                pool.submit(part1.grade_kernel_safely, kernel, folder, workroot / name, config,
                            backend.on_gpu, reference): (name, kernel)
                for name, folder, kernel in tasks
            }
            for future in as_completed(futures):
                name, kernel = futures[future]
                items[name, kernel] = future.result()
                bar.update(f"{name}: {kernel}")
    for name, folder in submissions:
        result = SubmissionResult(name, str(folder), backend.describe())
        for kernel in kernels:
            result.items += items[name, kernel]
        report.write_json(result, args.out / f"{name}.json")
        results.append(result)
    report.write_csv(results, args.out / "grades.csv")
    print(report.table(results, backend.describe()))
    lost = report.details(results) if args.details else report.failures(results)
    if lost:
        print("\n" + lost)
    print(f"\nReports: {args.out / 'grades.csv'} and one JSON per submission in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
