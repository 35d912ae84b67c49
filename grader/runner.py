"""Running one job of a submission in its own process, with a time limit.

The worker starts in a fresh process group from a throw-away copy of the submission, so a
crash, hang or stray file costs that job only; on timeout the whole group is killed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nnkit.submission import KIT_ROOT

OUTPUT_TAIL = 3000  # characters of the worker's output kept for the feedback


@dataclass
class WorkerRun:
    outdir: Path
    returncode: int | None
    timed_out: bool
    output_tail: str
    backend: str | None
    seconds: float  # wall-clock time of the worker

    def stop_reason(self, limit: float) -> str:
        """Why results may be missing, in words for the feedback."""
        if self.timed_out:
            return f"stopped after the {limit:g} s time limit"
        if self.returncode not in (0, None):
            tail = self.output_tail.strip().splitlines()[-1:] or ["no output"]
            return f"the worker process died (exit status {self.returncode}): {tail[0][:300]}"
        if not (self.outdir / "done").exists():
            return "the worker stopped early (the submission ended the process)"
        return "the worker finished without producing it"


def copy_submission(src: Path, dest: Path) -> Path:
    """A private working copy of the submission's Python files and data."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return dest


def worker_env(on_gpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "NUMBA_"))}
    # The kit first; then whatever the grading machine itself needs on the path.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(KIT_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["NNKIT_DEVICE"] = "gpu" if on_gpu else "sim"  # the worker runs where the grader decided
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_worker(job: dict, workdir: Path, timeout: float, on_gpu: bool) -> WorkerRun:
    """Run grader.worker on `job` inside workdir; the job's outdir is created there."""
    outdir = workdir / "out"
    outdir.mkdir(parents=True, exist_ok=True)
    job = {**job, "outdir": str(outdir)}
    job_file = workdir / "job.json"
    job_file.write_text(json.dumps(job))
    cwd = Path(job["submission"]) if job.get("submission") else workdir
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader.worker", str(job_file)],
        cwd=cwd,
        env=worker_env(on_gpu),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    start = time.perf_counter()
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        output, _ = proc.communicate()
    _kill_group(proc.pid)  # anything the submission left running in the background
    seconds = time.perf_counter() - start
    backend = None
    status = outdir / "worker.json"
    if status.exists():
        try:
            backend = json.loads(status.read_text()).get("backend")
        except (ValueError, AttributeError):
            backend = None
    text = output.decode(errors="replace")
    return WorkerRun(outdir, proc.returncode, timed_out, text[-OUTPUT_TAIL:], backend, seconds)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
