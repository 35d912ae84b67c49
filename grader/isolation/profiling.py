"""Where each grading job's time went, for the kit's developers (GRADER_PROFILE).

Nothing graded reads these files: they hold the worker's own word (its phases.json) and
the runner's timings, one JSON line per job, and with GRADER_CPROFILE the worker's
cProfile summary as well. tests/bench_sim_grading.py summarises them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from grader import safe_io
from grader.worker.jobs import Job

STATUS_BYTES = 64 << 10  # of phases.json
_lock = threading.Lock()  # jobs of several threads append to one file

PROFILE = "GRADER_PROFILE"  # a file: one JSON line per job, where its time went
# Set too (any value): each worker runs under cProfile, and its 40 costliest functions are
# appended to GRADER_PROFILE's file + ".cprofile.txt" (slower; for finding the cost).
CPROFILE = "GRADER_CPROFILE"
CPROFILE_CHARS = 16_000


def write_profile(job: Job, results: Path, entered: float, started: float,
                  seconds: float, cpu: float, waits: dict | None = None) -> None:
    """Append where this job's time went (set-up of the sandbox, then the worker's own
    phases.json, then collection) to the file GRADER_PROFILE names. For the grader's
    developers: the phases are the worker's word, which nothing graded relies on. A phase
    may carry the worker's CPU seconds at its end too (steps_cpu); `cpu_children` is the
    CPU time of the processes reaped while this job ran, the job's own only when jobs
    run one at a time (--jobs 1); `waits` (the time frozen for other jobs' timing
    windows, the windows it opened) is added as it is."""
    try:
        phases = safe_io.read_json(results / "phases.json", STATUS_BYTES)
    except (OSError, ValueError):
        phases = []
    steps, last = {"sandbox": round(started - entered, 3)}, started
    steps_cpu, last_cpu = {}, 0.0
    for entry in phases if isinstance(phases, list) else []:
        if isinstance(entry, list) and len(entry) in (2, 3) and all(
                isinstance(x, int | float) for x in entry[1:]):
            steps[str(entry[0])[:40]] = round(float(entry[1]) - last, 3)
            last = float(entry[1])
            if len(entry) == 3:
                steps_cpu[str(entry[0])[:40]] = round(float(entry[2]) - last_cpu, 3)
                last_cpu = float(entry[2])
    steps["after"] = round(time.time() - last, 3)
    line = {"kind": job.kind, "module": getattr(job, "module", None),
            "worker_seconds": round(seconds, 3), "total": round(time.time() - entered, 3),
            "cpu_children": round(cpu, 3), "steps": steps, "steps_cpu": steps_cpu,
            **(waits or {})}
    try:
        with _lock, open(os.environ[PROFILE], "a") as f:
            f.write(json.dumps(line) + "\n")
    except OSError:  # a developer's aid: never the grading's failure
        return
    if os.environ.get(CPROFILE):
        try:
            text = safe_io.read_text(results / "cprofile.txt", CPROFILE_CHARS)
        except (OSError, ValueError):
            return
        with _lock, open(os.environ[PROFILE] + ".cprofile.txt", "a") as f:
            f.write(f"=== {line['kind']} {line['module'] or ''} total {line['total']} s\n"
                    f"{text}\n")
