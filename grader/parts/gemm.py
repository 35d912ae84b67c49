"""Part 1: grading the three GEMM kernels of a submission (correctness, then speed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cases.gemm import (
    COUNTED_SHAPE,
    GemmCase,
    correctness_cases,
    counted_case,
    derived,
    job_inputs,
    perf_cases,
    profile_case,
    replayed_cases,
)
from grader.checks import anticheat, gemm_structure, refusals, simperf
from grader.checks.gemm import check_case, check_perf, error_text
from grader.isolation import sanitizer
from grader.isolation.runner import copy_submission, run_worker
from grader.parts.common import failure_message, fresh_copy, graded_item
from grader.results import FAIL, NOT_GRADED, PARTIAL, PASS, ItemResult
from grader.safe_io import collapse_repeats, one_line
from grader.scoring import Config, geometric_mean, speed_share
from grader.worker import CUBLAS
from grader.worker.jobs import GemmJob
from nnkit.gemm import BONUS_KERNELS, KERNELS
from nnkit.submission import NAMED
from nnkit.timing import gemm_gflops

if TYPE_CHECKING:
    from grader.parts.gemm_speed import Verdicts

NO_REFERENCE = "not graded: the solution's kernels were not timed in this run"


class ReferenceError(RuntimeError):
    """The solution or cuBLAS failed while being timed as the reference."""


@dataclass
class Reference:
    """Best seconds per benchmark shape of each solution kernel and of cuBLAS, this run."""

    seconds: dict[str, list[float]]


def job_spec(submission: Path | None, kernel: str, cases: list[GemmCase], perf: list[GemmCase],
         config: Config, replay: list[int] = (), profile: GemmCase | None = None) -> GemmJob:
    """The job a worker gets: case descriptions (no values: those come as its inputs),
    which cases it replays, the seed of its timed calls' factors and the call whose
    memory traffic it counts (simulator only)."""
    module, function = KERNELS[kernel] if kernel != CUBLAS else (CUBLAS, None)
    return GemmJob(
        profile=profile.to_json() if profile is not None else None,
        submission=str(submission) if submission else None,
        module=module,
        function=function,
        cases=[c.to_json() for c in cases],
        perf=[c.to_json() for c in perf],
        repeats=config.repeats,
        warmup=config.warmup,
        replay=list(replay),
        perf_seed=perf_seed(config, kernel),
        counted=counted_case(cases),  # the graded case also counted (simulator only)
    )


def perf_seed(config: Config, kernel: str) -> int:
    return derived(config.secret, "perf", kernel) % (2**31)


def time_limit(config: Config, on_gpu: bool) -> float:
    return config.seconds_gpu if on_gpu else config.seconds_simulator


def graded_kernels(config: Config) -> list[str]:
    """The kernels a grading run covers by default: the bonus ones only where the config
    turns the bonus on."""
    return [k for k in KERNELS if config.bonus or k not in BONUS_KERNELS]


def measure_reference(config: Config, workroot: Path) -> Reference:
    """Time the solution's kernels and cuBLAS on the benchmark shapes (GPU only), each
    in a fresh worker like a submission's timed job. Everything is timed twice and the
    first round is thrown away: measured once, the first kernel met a GPU not yet at its
    clocks and its reference came out ~14% slow, which graded copies of the solution
    1.14 times "faster" than itself. (Not the faster of the two rounds: a submission
    gets one round, and the better of two would bias every ratio upwards.)"""
    seconds: dict[str, list[float]] = {}
    for round_ in ("warm-up", "timed"):
        for kernel in [*graded_kernels(config), CUBLAS]:
            seconds[kernel] = _reference_seconds(kernel, config,
                                                 workroot / "reference" / f"{kernel}-{round_}")
    return Reference(seconds)


def _reference_seconds(kernel: str, config: Config, workdir: Path) -> list[float]:
    source = None if kernel == CUBLAS else copy_submission(NAMED["solution"],
                                                           workdir / "submission")
    job = job_spec(source, kernel, [], perf_cases(), config)
    run = run_worker(job, workdir, time_limit(config, True), on_gpu=True,
                     inputs=job_inputs([], perf_cases(), config.secret))
    outcomes = [check_perf(c, run.outdir, n, run.stop_reason(config.seconds_gpu),
                           config.secret, job.perf_seed, own_code=kernel != CUBLAS)
                for n, c in enumerate(perf_cases())]
    failed = [o for o in outcomes if o.seconds is None]
    if failed:
        raise ReferenceError(f"reference {kernel}: {failed[0].label}: {failed[0].message}")
    return [o.seconds for o in outcomes]


def grade_kernel(kernel: str, submission: Path, workroot: Path, config: Config, on_gpu: bool,
                 reference: Reference | None,
                 verdicts: Verdicts | None = None) -> list[ItemResult]:
    """The correctness item of one kernel, from its cases in one worker (which may share
    its GPU with other jobs). With `verdicts` (a GPU run), the verdict goes there for the
    submission's timed task (grade_speed); without, the speed item comes too: not
    graded, for want of a GPU."""
    try:
        return _grade_kernel(kernel, submission, workroot, config, on_gpu, reference,
                             verdicts)
    finally:
        if verdicts is not None:
            verdicts.record(kernel, False)  # a no-op once recorded; else it failed


def _grade_kernel(kernel: str, submission: Path, workroot: Path, config: Config,
                  on_gpu: bool, reference: Reference | None,
                  verdicts: Verdicts | None) -> list[ItemResult]:
    cases = correctness_cases(on_gpu, kernel)
    workdir = workroot / kernel
    copy = fresh_copy(workdir, submission)
    replay = replayed_cases(len(cases), on_gpu, derived(config.secret, "replay", kernel))
    profile = None if on_gpu else profile_case(kernel)
    job = job_spec(copy, kernel, cases, [], config, replay, profile)
    # The policy reads the copy before the job runs: the job may rewrite its own files.
    rules = anticheat.policy_verdict(copy, KERNELS[kernel][0], "gemm", config.policy)
    run = run_worker(job, workdir, time_limit(config, on_gpu), on_gpu,
                     inputs=job_inputs(cases, [], config.secret, profile, replay))
    stopped = run.stop_reason(time_limit(config, on_gpu))
    load_error = run.outdir / "load.err"
    if load_error.exists():
        stopped = "could not load the module: " + error_text(load_error)
    outcomes = [check_case(c, run.outdir, n, stopped, config.findings_fail,
                           previous=cases[n - 1] if c.reuse and n else None,
                           secret=config.secret, replayed=n in replay)
                for n, c in enumerate(cases)]
    collapse_repeats(outcomes)  # an error text once per item, not once per case
    correct = all(o.passed for o in outcomes)
    stopped_by_guard = refusals.stop_message(run.outdir)
    item_id = f"gemm.{kernel}.correctness"
    failures = [o for o in outcomes if not o.passed]
    if stopped_by_guard:
        correct = False
        message = stopped_by_guard
    elif correct:
        message = (f"all {len(outcomes)} cases within the float32 error bound, computed by "
                   f"the submission's kernels ({len(replay)} replayed)")
    elif load_error.exists():
        message = stopped
    else:
        message = failure_message(failures, len(outcomes))
    # A library product where the GEMM must be hand-written: called (the worker's traps)
    # or written in the source (the scan, here, of the submitted files themselves).
    called = anticheat.read_hits(run.outdir)
    written = anticheat.scan(submission, KERNELS[kernel][0])
    figures = {"worker_seconds": round(run.seconds, 2)}
    # What zeroes the item whatever its cases gave, partial credit included.
    integrity = stopped_by_guard or None
    if profile is not None and not load_error.exists():
        figures[simperf.KEY] = memory_traffic(kernel, profile, run.outdir, workroot, config)
    if not load_error.exists() and not stopped_by_guard and not failures:
        if on_gpu:  # the rule's counts come from the simulator: one call run there
            not_this_version, hits = version_on_simulator(kernel, submission, workroot,
                                                          config)
            called += hits
        else:
            not_this_version = gemm_structure.problem(kernel, run.outdir, cases)
        if not_this_version:  # every case right, but not by the version the file names
            correct, message = False, not_this_version
            integrity = message
    if called or (written and config.static_scan_fails):
        correct = False
        found = anticheat.summary(called or written)
        message = (f"uses a library matrix product where the GEMM must be hand-written: "
                   f"{found}" + (f"; {message}" if failures else ""))
        integrity = message
    elif written:
        message += ("; note: the source names a library matrix product, not counted here: "
                    + anticheat.summary(written))
    if called or written:
        figures["library_products"] = {"called": [f.describe() for f in called],
                                       "in_source": [f.describe() for f in written]}
    if rules.found:
        figures["policy"] = rules.found
    if rules.failure:
        correct, message = False, rules.failure + (f"; {message}" if not correct else "")
        integrity = message
    elif rules.note:
        message += "; " + rules.note
    checks = [{"case": o.label, "passed": o.passed, "message": o.message,
               "worst_error_over_bound": o.worst_error_ratio} for o in outcomes]
    if on_gpu and config.sanitizer_tools and not load_error.exists():
        reports, note = sanitizer_reports(kernel, submission, workroot, config, on_gpu)
        before = correct
        correct, message = apply_sanitizer(reports, note, correct, message, config, checks,
                                           figures)
        if before and not correct:  # a finding that fails the item fails all of it
            integrity = integrity or message
    correctness = graded_item(item_id, config, outcomes, message, integrity, checks=checks,
                              figures=figures)
    if verdicts is not None:
        verdicts.record(kernel, correct, written)
        return [correctness]  # the timed task of the submission gives the speed item
    return [correctness, performance_item(kernel, correct, None, [], config, reference,
                                          on_gpu=on_gpu)]


def version_on_simulator(kernel: str, submission: Path, workroot: Path,
                         config: Config) -> tuple[str, list[anticheat.Finding]]:
    """The version rule of a GPU run (grader/checks/gemm_structure.py): the rule's counted
    case, 33x40x37, run once more in the simulator, which counts its memory traffic (a GPU
    counts nothing). (why the kernel is not its version or '', library products the run
    called). A kernel that computes the case wrong there or fails to run is not shown to
    be its version and fails: a launcher that tells the backends apart (`hasattr(C,
    "get")`) raised in the simulator only, and a naive kernel kept the shared and
    register items on a GPU (red team). Students can run the simulator (`make check`
    without a GPU), and the case is the small one every version must compute."""
    if kernel not in gemm_structure.RULED:
        return "", []
    cases = [c for c in correctness_cases(False, kernel) if (c.M, c.N, c.K) == COUNTED_SHAPE]
    workdir = workroot / f"{kernel}-version"
    copy = fresh_copy(workdir, submission)
    run = run_worker(job_spec(copy, kernel, cases, [], config), workdir,
                     config.seconds_simulator, False,
                     inputs=job_inputs(cases, [], config.secret))
    load_error = run.outdir / "load.err"
    stopped = ("could not load the module: " + error_text(load_error) if load_error.exists()
               else run.stop_reason(config.seconds_simulator))
    outcome = check_case(cases[0], run.outdir, 0, stopped, config.findings_fail,
                         secret=config.secret)
    hits = anticheat.read_hits(run.outdir)
    why = refusals.stop_message(run.outdir) or ("" if outcome.passed else outcome.message)
    if why:
        return (f"the version could not be checked: the call the rule counts failed in the "
                f"CUDA simulator, where every version must run ({cases[0].label()}: "
                f"{one_line(why, 200)})"), hits
    return gemm_structure.problem(kernel, run.outdir, cases), hits


def memory_traffic(kernel: str, profile: GemmCase, outdir: Path, workroot: Path,
                   config: Config) -> dict:
    """The feedback figure of the kernel's counted call, beside the solution's (the
    solution counted once per grading run, in a worker of its own)."""
    def measure() -> tuple[simperf.Counts | None, str]:
        if not NAMED["solution"].is_dir():
            return None, "the solution is not part of this kit"
        workdir = workroot / "reference-sim" / kernel
        source = copy_submission(NAMED["solution"], workdir / "submission")
        run = run_worker(job_spec(source, kernel, [], [], config, profile=profile), workdir,
                         config.seconds_simulator, False,
                         inputs=job_inputs([], [], config.secret, profile))
        return simperf.read_counts(run.outdir)

    solution = simperf.solution_counts(config.secret, kernel, measure)
    return simperf.figure(profile.label(), profile.M * profile.N * profile.K,
                          simperf.read_counts(outdir), solution)


def sanitizer_reports(kernel: str, submission: Path, workroot: Path, config: Config,
                      on_gpu: bool) -> tuple[list[sanitizer.Report], str]:
    """The kernel's small cases under each configured compute-sanitizer tool, each in a
    worker of its own; the reports, or why none was made."""
    executable = sanitizer.find(config.sanitizer_path)
    if executable is None:
        return [], ("compute-sanitizer not found ([checks] gpu_sanitizer_path in the "
                    "config): not run")
    reports = []
    for tool in config.sanitizer_tools:
        workdir = workroot / f"{kernel}-{tool}"
        copy = fresh_copy(workdir, submission)
        run = run_worker(job_spec(copy, kernel, sanitizer.cases(), [], config), workdir,
                         config.seconds_sanitizer, on_gpu,
                         launcher=sanitizer.launcher(executable, tool),
                         inputs=job_inputs(sanitizer.cases(), [], config.secret))
        reports.append(sanitizer.parse(tool, run.output_tail, run.returncode))
    return reports, ""


def apply_sanitizer(reports: list[sanitizer.Report], note: str, correct: bool, message: str,
                    config: Config, checks: list[dict], figures: dict) -> tuple[bool, str]:
    """Fold compute-sanitizer reports into a correctness item: a check each, in the
    figures, and, where the config says so, a failed item for any finding."""
    for report in reports:
        checks.append({"case": f"compute-sanitizer {report.tool}", "passed": report.clean,
                       "message": report.describe()})
    figures["sanitizer"] = [r.describe() for r in reports] or [note]
    found = [r for r in reports if not r.clean]
    if note:
        return correct, f"{message}; {note}"
    if not found:
        return correct, f"{message}; compute-sanitizer: no findings"
    said = "; ".join(r.describe() for r in found)
    if config.sanitizer_findings_fail:
        return False, said + ("" if correct else f"; {message}")
    return correct, f"{message}; note, not counted here: {said}"


def performance_item(kernel: str, correct: bool, run, perf: list[GemmCase], config: Config,
                     reference: Reference | None, prefix: str = "",
                     on_gpu: bool = False) -> ItemResult:
    item_id = f"gemm.{kernel}.performance"
    title, max_points = config.title(item_id), config.points(item_id)
    if reference is None:
        return ItemResult(item_id, title, max_points, None, NOT_GRADED, NO_REFERENCE if on_gpu
                          else "not graded (no GPU): performance is graded on a GPU only")
    if not correct:
        return ItemResult(item_id, title, max_points, 0.0, FAIL,
                          "not timed: the kernel must pass its correctness item first")
    stopped = run.stop_reason(config.seconds_gpu)
    outcomes = [check_perf(c, run.outdir, n, stopped, config.secret, perf_seed(config, kernel),
                           prefix=prefix) for n, c in enumerate(perf)]
    broken = [o for o in outcomes if o.seconds is None]
    if broken:
        return ItemResult(item_id, title, max_points, 0.0, FAIL,
                          f"{broken[0].label}: {broken[0].message}")
    checks, ratios = [], []
    for n, (case, outcome) in enumerate(zip(perf, outcomes, strict=True)):
        t_sol, t_blas = reference.seconds[kernel][n], reference.seconds[CUBLAS][n]
        ratios.append(outcome.seconds / t_sol)
        checks.append({
            "case": case.label(),
            "seconds": outcome.seconds,
            "gflops": gemm_gflops(case.M, case.N, case.K, outcome.seconds),
            "solution_gflops": gemm_gflops(case.M, case.N, case.K, t_sol),
            "cublas_gflops": gemm_gflops(case.M, case.N, case.K, t_blas),
            "time_over_solution": outcome.seconds / t_sol,
            "share_of_cublas": t_blas / outcome.seconds,
        })
    ratio = geometric_mean(ratios)
    share = speed_share(ratio, config.full_at, config.zero_at)
    status = PASS if share == 1.0 else (FAIL if share == 0.0 else PARTIAL)
    message = (f"time / solution's time = {ratio:.2f} (geometric mean over "
               f"{len(perf)} shapes): {share:.0%} of the points")
    return ItemResult(item_id, title, max_points, round(share * max_points, 2), status, message,
                      checks=checks, figures={"time_over_solution": ratio})
