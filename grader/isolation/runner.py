"""Running one job of a submission in its own process, sandboxed, with a time limit.

The worker runs from a throw-away copy of the submission, in a fresh session and process
group, under grader/isolation/sandbox.py's confinement (a uid of its own, namespaces and resource
limits, as far as the machine allows). When it ends or runs out of time, every process of
the job is killed, and only then are its results copied, as plain files, to a folder the
job never had access to: the grader reads them from there, through grader/safe_io.py.

Every running job is registered here, so that `stop_all` (the grader's SIGINT and SIGTERM
handler) kills them all at once (the sandbox's `kill`: process group, PID namespace and
uid) and no new one starts after it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from grader import safe_io
from grader.checks import refusals
from grader.isolation import gpus, probe, profiling, sandbox
from grader.isolation.windows import WindowServer
from grader.submissions import copy_submission
from grader.worker import guard
from grader.worker.jobs import Job

__all__ = ["WorkerRun", "copy_submission", "run_worker", "stop_all", "stopping"]

OUTPUT_TAIL = 3000  # characters of the worker's output kept for the feedback
STATUS_BYTES = 64 << 10  # worker.json
INTERRUPTED = "the grading run was interrupted (SIGINT or SIGTERM) before this job ended"

# The jobs running now: id(proc) -> (sandbox, process), for stop_all.
_live: dict[int, tuple[sandbox.Sandbox, subprocess.Popen]] = {}
_live_lock = threading.RLock()  # reentrant: stop_all may run in a signal handler
_stopping = threading.Event()


def stop_all() -> int:
    """Kill every running job and refuse to start new ones (for SIGINT and SIGTERM);
    returns how many jobs were killed. The threads waiting on them then return as usual,
    and their temporary folders are removed by their owners."""
    with _live_lock:
        _stopping.set()
        live = list(_live.values())
    for box, proc in live:
        box.kill(proc)
    return len(live)


def stopping() -> bool:
    """Whether stop_all was called (results of jobs ending now are not to be trusted)."""
    return _stopping.is_set()


def reset() -> None:
    """Start new jobs again (a new grading run in the same process)."""
    _stopping.clear()


@dataclass
class WorkerRun:
    outdir: Path  # the results, copied out of the job's reach once it ended
    returncode: int | None
    timed_out: bool
    output_tail: str
    backend: str | None
    seconds: float  # wall-clock time of the worker
    frozen: bool = False  # another job's timing window froze it at least once
    displaced: bool = False  # stopped for another job's timing window (gpus.Gate)
    disturbed: bool = False  # its own window may have met others' work (gpus.Gate._stop)

    def stop_reason(self, limit: float) -> str:
        """Why results may be missing, in words for the feedback."""
        if self.returncode == STOPPED:
            return INTERRUPTED
        if self.timed_out:
            return f"stopped after the {limit:g} s time limit"
        if self.returncode == guard.GUARD_STATUS:
            return (refusals.stop_message(self.outdir)
                    or "the grader stopped the submission: it did what graded code may not")
        if self.returncode == sandbox.SETUP_FAILED:
            return f"the grader could not start the sandbox: {self._last_line()}"
        if self.returncode not in (0, None):
            reason = f"the worker process died (exit status {self.returncode}): "
            if self.returncode == -9:
                reason += "killed (out of memory?); "
            return reason + self._last_line()
        if not (self.outdir / "done").exists():
            return "the worker stopped early (the submission ended the process)"
        return "the worker finished without producing it"

    def _last_line(self) -> str:
        tail = self.output_tail.strip().splitlines()[-1:] or ["no output"]
        line = tail[0][:300]
        if "MemoryError" in line:
            line += f" (memory limit: {sandbox.limits_text(sandbox.current())})"
        return line


STOPPED = -1000  # WorkerRun.returncode of a job never started: the run is stopping


_announced = threading.Event()


def run_worker(job: Job, workdir: Path, timeout: float, on_gpu: bool, *,
               launcher: list[str] | tuple[str, ...] = (), module: str = "grader.worker",
               extra_env: dict[str, str] | None = None,
               inputs: dict[str, np.ndarray] | None = None, windows: int = 0,
               shared: bool = True, rerun: bool = False) -> WorkerRun:
    """Run `module` (of grader/worker/) on `job` inside workdir; the job's outdir is
    created there. launcher goes before the interpreter (say, mpiexec's command: every
    process it starts is confined and killed with the job alike); extra_env is added to
    the clean environment; inputs (the case operands the grader built) are written into
    the job's folder, where the worker reads them before it imports the submission.
    windows: a timed job's number of timed stretches, each of which needs the GPU alone
    (grader/isolation/windows.py) where its jobs can be frozen; elsewhere the job holds
    the GPU alone from start to end.

    A job that shared its GPU and ran out of GPU memory is run once more with the GPU to
    itself, from a copy of its folder as it was before the first run: another
    submission's job may have held the memory (cgroups do not limit GPU memory, and a
    job frozen for a timing window keeps what it allocated). So is one that ran past its
    time limit after a timing window froze it: on an H100 a correct network's training
    job, frozen and thawed, once ran on to its limit, which its student must not pay
    for. A submission that loops for ever pays twice its limit in time, the second alone
    on the GPU (a cost to the class's wall time, no gain to it). A job stopped to give
    another job's timing window an idle GPU (gpus.Gate: displaced) runs once more beside
    the others (`rerun`), and alone if it is stopped again; a timed job whose window may
    have met other jobs' work (gpus.Gate._stop: disturbed) runs again alone."""
    settings = sandbox.current()
    caps = probe.capabilities(settings, on_gpu)
    gate = gpus.current_gate() if on_gpu and shared else None
    if windows and (gate is None or caps.cgroup != "v2"):
        with gpus.exclusive():  # nothing to freeze others with: the whole job alone
            return run_worker(job, workdir, timeout, on_gpu, launcher=launcher,
                              module=module, extra_env=extra_env, inputs=inputs,
                              shared=False)
    workdir = Path(workdir).resolve()
    aside = _set_aside(workdir) if gate is not None else None
    try:
        run = _attempt(job, workdir, timeout, on_gpu, launcher, module, extra_env, inputs,
                       settings, caps, gate, windows)
        if aside is None or stopping():
            return run
        alone = True
        if run.disturbed:
            why = "its timing window may have met other jobs' work on the GPU"
        elif run.displaced:
            why = "stopped to give another job's timing window an idle GPU"
            alone = rerun
        elif out_of_gpu_memory(run):
            why = "out of GPU memory beside other jobs"
        elif run.timed_out and run.frozen:
            why = "past its time limit after being frozen for another job's timing"
        else:
            return run
        again = workdir.with_name(workdir.name + ("-alone" if alone else "-again"))
        shutil.rmtree(again, ignore_errors=True)
        shutil.copytree(aside, again, symlinks=True)
        print(f"{workdir}: {why}; run again" + (" alone" if alone else ""), file=sys.stderr)
        moved = Job.from_json(_moved(job.to_json(), workdir, again))
        if not alone:
            return run_worker(moved, again, timeout, on_gpu, launcher=launcher, module=module,
                              extra_env=extra_env, inputs=inputs, windows=windows,
                              rerun=True)
        with gpus.exclusive():
            return run_worker(moved, again, timeout, on_gpu,
                              launcher=launcher, module=module, extra_env=extra_env,
                              inputs=inputs, shared=False)
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


OUT_OF_GPU_MEMORY = re.compile(r"out of memory|OUT_OF_MEMORY|cudaErrorMemoryAllocation",
                               re.IGNORECASE)
ERROR_BYTES = 64 << 10  # of each .err file, for the check above


def out_of_gpu_memory(run: WorkerRun) -> bool:
    """Whether the job's output or one of its error files says CUDA ran out of memory
    (CuPy's OutOfMemoryError, numba's CUDA_ERROR_OUT_OF_MEMORY, the runtime's
    cudaErrorMemoryAllocation). A submission can print the words itself: it then gets
    its job run again alone, which costs the class a little time and gains it nothing."""
    if OUT_OF_GPU_MEMORY.search(run.output_tail):
        return True
    try:
        errors = sorted(run.outdir.glob("*.err"))[:200]
    except OSError:
        return False
    for path in errors:
        try:
            if OUT_OF_GPU_MEMORY.search(safe_io.read_text(path, ERROR_BYTES)):
                return True
        except (OSError, ValueError):
            continue
    return False


def _set_aside(workdir: Path) -> Path:
    """A copy of the job's folder before it runs (the submission's copy, input files the
    job removes once read), in a folder of the grader's beside it."""
    aside = workdir.with_name(workdir.name + "-aside")
    shutil.rmtree(aside, ignore_errors=True)
    if workdir.exists():
        shutil.copytree(workdir, aside, symlinks=True)
    else:
        aside.mkdir(parents=True)
    aside.chmod(0o700)
    return aside


def _moved(value, old: Path, new: Path):
    """value (a job) with every path inside old rewritten to the same place inside new."""
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    if isinstance(value, str) and (value == str(old) or value.startswith(str(old) + "/")):
        return str(new) + value[len(str(old)):]
    return value


def _attempt(job: Job, workdir: Path, timeout: float, on_gpu: bool, launcher, module: str,
             extra_env: dict[str, str] | None, inputs: dict[str, np.ndarray] | None,
             settings, caps, gate, windows: int) -> WorkerRun:
    entered = time.time()
    if not _announced.is_set():
        _announced.set()
        print(f"sandbox: {caps.describe(settings)}", file=sys.stderr)
    outdir = workdir / "out"
    outdir.mkdir(parents=True, exist_ok=True)
    memory = (settings.memory_mb_gpu if on_gpu else settings.memory_mb_simulator
              ) if caps.memory_limit else 0
    job = replace(job, outdir=str(outdir),
                  limits={"memory_mb": memory, "processes": settings.processes,
                          "file_mb": settings.file_mb},
                  thread_stack_kb=0 if on_gpu else settings.thread_stack_kb,
                  cprofile=bool(os.environ.get(profiling.CPROFILE)))
    if inputs:
        np.savez(workdir / "inputs.npz", **inputs)
        job = replace(job, inputs="inputs.npz")
    me = gpus.RunningJob(None)
    server = WindowServer(gate, me, windows) if gate is not None and windows else None
    try:
        if server is not None:
            job = replace(job, window=list(server.child_fds))
        return _run(job, workdir, timeout, on_gpu, launcher, module, extra_env, settings,
                    caps, entered, me, server)
    finally:
        if server is not None:
            server.close()


def _run(job: Job, workdir: Path, timeout: float, on_gpu: bool, launcher, module: str,
         extra_env: dict[str, str] | None, settings, caps, entered: float,
         me: gpus.RunningJob, server: WindowServer | None) -> WorkerRun:
    outdir = Path(job.outdir)
    job_file = workdir / "job.json"
    job_file.write_text(json.dumps(job.to_json()))
    cwd = Path(job.submission) if job.submission else workdir
    # -P: the working folder (the submission) is not put first on the path, where its
    # modules would stand in for the kit's and the libraries'.
    argv = [*launcher, sys.executable, "-P", "-m", module, str(job_file)]
    timed_out = False
    with sandbox.Sandbox(settings, caps, workdir, on_gpu) as box:
        box.env.update(gpus.worker_env())  # the GPU this thread holds, if several
        box.env.update(extra_env or {})
        me.cgroup = box.cgroup  # what a timing window of another job freezes
        log_path = box.private / "output.log"
        with open(log_path, "wb") as log, gpus.running(me):
            started = time.time()
            start = time.perf_counter()
            cpu_before = _children_cpu()
            with _live_lock:
                if _stopping.is_set():
                    proc = None
                else:
                    proc = subprocess.Popen(box.command(argv, cwd), cwd=workdir, env=box.env,
                                            stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            pass_fds=server.child_fds if server else ())
                    _live[id(proc)] = (box, proc)
                    me.stop = functools.partial(box.kill, proc)
            if proc is None:
                return WorkerRun(outdir, STOPPED, False, INTERRUPTED, None, 0.0)
            if server is not None:
                server.start()
            try:
                timed_out = not wait_for(proc, timeout, me)
            finally:
                with _live_lock:
                    _live.pop(id(proc), None)
                me.stop = None  # ended: nothing of it to stop for a window now
            box.kill(proc)  # also anything the submission left running in the background
            proc.wait()
            seconds = time.perf_counter() - start
            cpu = _children_cpu() - cpu_before
        results = box.collect(outdir, Path(tempfile.mkdtemp(
            prefix=f"{workdir.name}-results-", dir=workdir.parent)) / "out")
        text = _tail(log_path)
    if os.environ.get(profiling.PROFILE):
        profiling.write_profile(job, results, entered, started, seconds, cpu,
                      {"paused": round(me.paused, 3),
                       "windows": [server.opened, server.drained] if server else None,
                       "held": round(server.held, 3) if server else None})
    backend = None
    try:
        status = safe_io.read_json(results / "worker.json", STATUS_BYTES)
        if isinstance(status, dict) and isinstance(status.get("backend"), str):
            backend = safe_io.clean_text(status["backend"], 200)
    except (OSError, ValueError):
        backend = None
    return WorkerRun(results, proc.returncode, timed_out, text, backend, seconds,
                     me.freezes > 0, displaced(me, proc.returncode), me.disturbed)


def displaced(me: gpus.RunningJob, returncode: int | None) -> bool:
    """Whether a window's stop ended the job: one that finished by itself (status 0) just
    as a window stopped the others keeps its results."""
    return me.displaced and returncode != 0


def wait_for(proc: subprocess.Popen, timeout: float, me: gpus.RunningJob) -> bool:
    """Wait for the job to end within its time limit, not counting the time it spent
    frozen for another job's timing window; False when the limit passed first."""
    start = time.monotonic()
    while True:
        left = timeout + me.paused_now() - (time.monotonic() - start)
        if left <= 0:
            return False
        try:
            proc.wait(timeout=min(left, 1.0))
            return True
        except subprocess.TimeoutExpired:
            continue


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tail(path: Path) -> str:
    """The end of the job's output, decoded and stripped of terminal control sequences."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 4 * OUTPUT_TAIL))
        text = safe_io.clean_text(f.read().decode(errors="replace"))
    return text[-OUTPUT_TAIL:]
