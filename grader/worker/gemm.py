"""Part 1's job: a GEMM launcher on its correctness cases, then on its timed cases.

For every case the worker writes `case-N.npz`: the three buffers after the call, how many
of the submission's own kernels the call launched, and, for the cases the grader chose
to replay, the buffers as the replay of those launches left them, started from other
operands the grader gave for it (grader/worker/launches.py). Timed cases write
`perf-N.json` (seconds per call, own and other launches per call) and `perf-N.npz` (C after the
last timed call, samples of C after every call, and an extra untimed call with its
replay). In the simulator, a job may name one more case, `profile`, called once with its
memory traffic counted: `profile.json` (or `profile.err`).
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from grader.worker import COUNTS_SUFFIX, CUBLAS
from grader.worker.common import Context, mark, save_error, save_launches
from grader.worker.launches import COUNT, FULL
from grader.worker.layout import GemmCase, Operands, call_factors, perturbed_a, sample_positions
from grader.worker.traps import RECORD
from grader.worker.window import NoWindow
from nnkit.backend import copy_into, synchronize, to_device, to_host
from nnkit.gemm import cublas_gemm, gemm
from nnkit.submission import load_function
from nnkit.timing import time_calls

PROFILE_FILE = "profile.json"  # the counts of the profiled call (simulator only)
PROFILE_ERROR = "profile.err"
# Each timed case stops repeating once its timed calls have taken this long together (at
# least 3 calls; nnkit.timing.time_calls). The solution's calls take milliseconds, so a
# kernel is cut short only when it is many times slower, where its points are few: a
# naive kernel 60x the solution's held the GPU, every other job frozen, for 33 s.
TIMED_SECONDS = 2.0


def operands(ctx: Context, prefix: str, case: GemmCase) -> Operands:
    """The host buffers the grader wrote for one case."""
    inputs = ctx.inputs
    return Operands(inputs[f"{prefix}/A"], inputs[f"{prefix}/B"], inputs[f"{prefix}/C"],
                    case.interior())


def replay_inputs(ctx: Context, n: int) -> list[np.ndarray] | None:
    """The other operands (whole buffers A, B, C) the grader gave for the replay of case
    n, or None: the replay then starts from the call's own."""
    names = [f"case-{n}/replay/{k}" for k in "ABC"]
    if not all(name in ctx.inputs for name in names):
        return None
    return [ctx.inputs[name] for name in names]


def run(ctx: Context) -> None:
    if ctx.job.timed:
        run_timed(ctx)
        return
    job, out, submission = ctx.job, ctx.out, ctx.submission
    try:
        if job.module == CUBLAS:
            launch = cublas_gemm
        else:
            launch = load_function(submission, job.module, job.function)
    except BaseException as err:  # noqa: BLE001 - any failure of student code is reported
        save_error(out / "load.err", err, submission)
        return
    mark("load")
    watch = simulator_watch(ctx.on_gpu)
    replay = set(job.replay)
    counted = job.counted if not ctx.on_gpu else None
    last = None  # the previous case and its device buffers, for a case that reuses them
    for n, spec in enumerate(job.cases):
        case = GemmCase.from_json(spec)
        try:
            ops = operands(ctx, f"case-{n}", case)
            host = (ops.A_buf, ops.B_buf, ops.C_buf)
            if case.reuse and last is not None and _same_layout(last[0], case):
                bufs = last[1]
                for buf, array in zip(bufs, host, strict=True):
                    copy_into(buf, to_device(array))
            else:
                bufs = tuple(to_device(b) for b in host)
            last = (case, bufs)
            A, B, C = ops.views(bufs)
            ctx.recorder.begin(FULL, list(zip(bufs, host, strict=True)))
            try:
                counter = _counter() if n == counted else None
                if counter is not None:  # which shared loads return operands (version rule)
                    host_a, host_b, _ = ops.views()
                    counter.watch_operands(host_a, host_b, case.alpha)
                with watch(out / f"case-{n}.findings.json", counter):
                    gemm(launch, A, B, C, case.alpha, case.beta,
                         trans_a=case.trans_a, trans_b=case.trans_b)
                synchronize()
                if counter is not None:
                    (out / f"case-{n}{COUNTS_SUFFIX}").write_text(
                        json.dumps({"kernels": counter.to_json()}))
            finally:
                record = ctx.recorder.end()
            after = [to_host(b) for b in bufs]
            replayed = None
            if n in replay and record.own_launches:
                refs = {k: ctx.recorder.ref_of(b) for k, b in zip("ABC", bufs, strict=True)}
                replayed = ctx.recorder.replay(record, refs, replay_inputs(ctx, n))
            ctx.snapshot.check()
            np.savez(out / f"case-{n}.npz", A=after[0], B=after[1], C=after[2],
                     **save_launches(record, replayed))
        except BaseException as err:  # noqa: BLE001
            save_error(out / f"case-{n}.err", err, submission)
        if n == 0:
            mark("case-0")  # the first call compiles the kernels

    mark("cases")
    if job.profile and not ctx.on_gpu:
        try:
            _profile_case(ctx, launch, GemmCase.from_json(job.profile))
        except BaseException as err:  # noqa: BLE001
            save_error(out / PROFILE_ERROR, err, submission)
        mark("counted-call")

    perf = [GemmCase.from_json(spec) for spec in job.perf]
    if perf:
        time_cases(ctx, launch, perf)
        mark("perf")


def _alone(ctx: Context) -> AbstractContextManager:
    """The GPU to this job for the block (grader/worker/window.py), at its working clock
    (every timed job meets it the same way)."""
    library_traps = ctx.extra.get("traps")
    return ctx.extra["window"].alone(library_traps.paused if library_traps else nullcontext)


def run_timed(ctx: Context) -> None:
    """Several kernels' timed cases, one kernel after the other, in one worker (one start
    of Python, numba and CUDA instead of one per kernel). Each kernel's files carry its
    name (`naive-perf-0.json`), and so does the record of its library calls: the traps
    write to the file of the kernel being timed (calls while the modules load go to the
    job's own record, which the grader counts against every kernel)."""
    job, out, submission = ctx.job, ctx.out, ctx.submission
    launchers = {}
    for entry in job.timed:
        try:
            launchers[entry.kernel] = load_function(submission, entry.module, entry.function)
        except BaseException as err:  # noqa: BLE001
            save_error(out / f"{entry.kernel}-load.err", err, submission)
    mark("load")
    library_traps = ctx.extra.get("traps")
    perf = [GemmCase.from_json(spec) for spec in job.perf]
    for entry in job.timed:
        kernel = entry.kernel
        if kernel not in launchers:
            continue
        if library_traps:
            library_traps.record = out / f"{kernel}-{RECORD}"
        # One window per kernel: the others' jobs go on between.
        time_cases(ctx, launchers[kernel], perf, prefix=f"{kernel}-", seed=entry.perf_seed)
        mark(f"timed {kernel}")


def time_cases(ctx: Context, launch, cases: list[GemmCase], prefix: str = "",
               seed: int | None = None) -> None:
    """Every timed case of one launcher, its timed calls in one window (the GPU to this
    job, every other job on it frozen), and as little else as can be done outside it:
    each case is prepared before the window and finished after it (TimedCase)."""
    out, submission = ctx.out, ctx.submission
    prepared: dict[int, TimedCase] = {}
    for n, case in enumerate(cases):
        try:
            prepared[n] = TimedCase(ctx, launch, case, n, prefix, seed)
        except BaseException as err:  # noqa: BLE001
            save_error(out / f"{prefix}perf-{n}.err", err, submission)
    if not prepared:
        return
    try:
        with _alone(ctx):
            for n, timed in list(prepared.items()):
                try:
                    timed.time()
                except BaseException as err:  # noqa: BLE001
                    del prepared[n]
                    save_error(out / f"{prefix}perf-{n}.err", err, submission)
    except NoWindow as err:
        save_error(out / f"{prefix}perf-0.err", err, submission)
        return
    for n, timed in prepared.items():
        try:
            timed.finish()
        except BaseException as err:  # noqa: BLE001
            save_error(out / f"{prefix}perf-{n}.err", err, submission)


def _same_layout(a: GemmCase, b: GemmCase) -> bool:
    return (a.M, a.N, a.K, a.trans_a, a.trans_b, a.guard) == (b.M, b.N, b.K, b.trans_a,
                                                               b.trans_b, b.guard)


class TimedCase:
    """The launcher timed on one case. Before every call (outside the timer) A gets new
    values, scaled by a factor drawn from the job's secret seed, and C its starting ones;
    after it, a sample of C is kept for the grader to check and the launches of the
    submission's own kernels are counted, so that no call can skip its work, replay an
    earlier result or leave its kernels to run after the timer stopped. One more call,
    untimed, is recorded in full and replayed.

    In three stages, so that the window holds the timed calls and little else: the
    constructor (before the window) puts the operands on the device, perturbs every
    call's A in advance (on the host) and makes the first warm-up call, which compiles
    the kernels (seconds with numba: every other job would wait through them); `time()`
    (in the window) makes the other calls; `finish()` (after it) makes the extra call and its
    replay and writes the files."""

    def __init__(self, ctx: Context, launch, case: GemmCase, n: int, prefix: str = "",
                 seed: int | None = None):
        job = ctx.job
        self.ctx, self.launch, self.case, self.n, self.prefix = ctx, launch, case, n, prefix
        self.ops = ops = operands(ctx, f"perf-{n}", case)
        self.bufs = tuple(to_device(b) for b in (ops.A_buf, ops.B_buf, ops.C_buf))
        self.views = ops.views(self.bufs)  # the same view objects in every call
        self.pristine_C = to_device(ops.C_buf)
        self.repeats, self.warmup = job.repeats, job.warmup
        calls = self.repeats + self.warmup
        seed = job.perf_seed if seed is None else seed
        self.factors = call_factors(seed + n, calls + 1)
        # Computed now, uploaded at each call: kept on the device, a call's kernels could
        # find the later calls' A there (device memory is the process's to read) and
        # compute their products ahead.
        self.calls_A = [perturbed_a(ops.A_buf, f, case.trans_a) for f in self.factors[:calls]]
        self.rows, self.cols = sample_positions(case, seed)
        self.samples: list[np.ndarray] = []
        self.launches: list[int] = []
        self.others: list[int] = []  # launches of kernels that are not the submission's
        self.early = min(1, self.warmup)  # warm-up calls made before the window
        self._calls(0, self.early)

    def _call(self) -> None:
        A, B, C = self.views
        gemm(self.launch, A, B, C, self.case.alpha, self.case.beta)

    def _before(self) -> None:
        copy_into(self.bufs[0], to_device(self.calls_A[len(self.samples)]))
        copy_into(self.bufs[2], self.pristine_C)
        self.ctx.recorder.begin(COUNT)

    def _after(self) -> None:
        record = self.ctx.recorder.end()
        self.launches.append(record.own_launches)
        self.others.append(record.other_launches)
        self.samples.append(to_host(self.bufs[2])[self.ops.interior][self.rows, self.cols])

    def _calls(self, repeats: int, warmup: int, budget: float | None = None):
        return time_calls(self._call, repeats=repeats, warmup=warmup, before_each=self._before,
                          after_each=self._after, clock=self.ctx.clock, budget=budget)

    def time(self) -> None:
        self.timings = self._calls(self.repeats, self.warmup - self.early, TIMED_SECONDS)
        self.C_last = to_host(self.bufs[2])  # before a later case's kernels could touch it
        self.calls_A = []  # the memory back before the next case

    def finish(self) -> None:
        ctx, case, ops, bufs = self.ctx, self.case, self.ops, self.bufs
        recorder = ctx.recorder
        # The extra call: full record, then the replay of its launches.
        # (the factor after the calls made: the timing may have stopped early)
        A_extra = perturbed_a(ops.A_buf, self.factors[len(self.samples)], case.trans_a)
        copy_into(bufs[0], to_device(A_extra))
        copy_into(bufs[2], self.pristine_C)
        recorder.begin(FULL, [(bufs[0], A_extra), (bufs[1], ops.B_buf), (bufs[2], ops.C_buf)])
        try:
            self._call()
            synchronize()
        finally:
            record = recorder.end()
        extra_C = to_host(bufs[2])
        replayed = recorder.replay(record, {"C": recorder.ref_of(bufs[2])}) \
            if record.own_launches else None
        ctx.snapshot.check()
        name = f"{self.prefix}perf-{self.n}"
        np.savez(ctx.out / f"{name}.npz", C=self.C_last, samples=np.stack(self.samples),
                 extra_C=extra_C, **save_launches(record, replayed))
        (ctx.out / f"{name}.json").write_text(json.dumps(
            {"host": self.timings.host, "device": self.timings.device,
             "launches": self.launches, "other_launches": self.others}))


def _profile_case(ctx: Context, launch, case: GemmCase) -> None:
    """One more call, in the simulator, with the kernels' memory traffic counted
    (grader/worker/memcount.py): `profile.json`, for feedback only."""
    from grader.worker import memcount, simcheck

    ops = operands(ctx, "profile", case)
    bufs = tuple(to_device(b) for b in (ops.A_buf, ops.B_buf, ops.C_buf))
    A, B, C = ops.views(bufs)
    counter = memcount.Counter()
    with simcheck.instrument(counter=counter):
        gemm(launch, A, B, C, case.alpha, case.beta, trans_a=case.trans_a,
             trans_b=case.trans_b)
        synchronize()
    ctx.snapshot.check()
    (ctx.out / PROFILE_FILE).write_text(json.dumps({"kernels": counter.to_json()}))


def _counter() -> Any:
    from grader.worker import memcount

    return memcount.Counter()


def simulator_watch(on_gpu: bool):
    """In the simulator: a context manager factory that runs a launch under the race and
    index checker and writes its findings to the given file (and counts its memory traffic
    into a memcount.Counter, if given). On a GPU: does nothing."""
    from contextlib import contextmanager

    if on_gpu:
        return lambda path, counter=None: nullcontext()
    from grader.worker import simcheck

    @contextmanager
    def watch(path: Path, counter: Any = None):
        with simcheck.instrument(counter=counter) as findings:
            try:
                yield
            finally:
                path.write_text(json.dumps([f.to_json() for f in findings]))

    return watch
