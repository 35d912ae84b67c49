"""What every job of the worker shares: its context, and error texts for the grader."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Seconds since the epoch, and CPU seconds of this process, at named points of this
# worker's life (`mark`), written to phases.json at its end: where a job's time goes, for
# profiling the grader only (the submission can write there too, so nothing graded
# reads it).
PHASES: list[tuple[str, float, float]] = []
LIMITS: dict = {}  # the sandbox's limits of this worker, from the job (for messages only)
ERROR_CHARS = 1800  # the most of one error text the worker writes


@dataclass
class Context:
    """Set up before the submission is imported; the jobs use nothing else of the kit's
    state (module globals could have been replaced by then; these references not)."""

    job: Any  # jobs.Job: the job's own class (GemmJob, NetJob, ...)
    out: Path
    submission: Path | None
    inputs: dict[str, np.ndarray]  # the case inputs the grader wrote for this job
    recorder: Any  # launches.Recorder, or None for a job of the kit's own code
    snapshot: Any  # tamper.Snapshot
    clock: Any  # nnkit.timing.Clock
    on_gpu: bool
    extra: dict = field(default_factory=dict)


class Profiled:
    """With the job's `cprofile` (GRADER_CPROFILE, grader/isolation/profiling.py): the block
    runs under cProfile and its costliest functions go to `out`/cprofile.txt. For the
    grader's developers only, as phases.json. Enter it before the guard is armed: the
    guard refuses sys.setprofile, which cProfile's enable and disable raise, so the stats
    are read at the end without disabling the profiler (the worker exits just after)."""

    def __init__(self, on: bool, out: Path):
        self.on, self.out = on, out

    def __enter__(self) -> Profiled:
        if self.on:
            import cProfile

            self.profile = cProfile.Profile()
            self.profile.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.on:
            return
        import io
        import pstats

        self.profile.snapshot_stats()  # the stats so far, the profiler left running
        frozen = type("Frozen", (), {"stats": self.profile.stats,
                                      "create_stats": lambda _self: None})()
        text = io.StringIO()
        stats = pstats.Stats(frozen, stream=text)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(20)
        (self.out / "cprofile.txt").write_text(text.getvalue())


def write_phases(out: Path) -> None:
    """PHASES to out/phases.json; never fatal (the submission can reach PHASES, and
    nothing graded reads the file)."""
    import json

    try:
        (out / "phases.json").write_text(json.dumps(PHASES))
    except Exception:  # noqa: BLE001, S110 - a profiling aid only
        pass


def mark(phase: str) -> None:
    """Note that `phase` ended now (see PHASES)."""
    import time

    PHASES.append((phase, time.time(), time.process_time()))


def read_inputs(path: Path) -> dict[str, np.ndarray]:
    """The arrays the grader wrote into `path` (.npz); the file is removed once read, so
    that nothing of it is left for the submission to find."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    try:
        path.unlink()
    except OSError:
        pass
    return arrays


def read_roots() -> list[Path]:
    """Folders a submission may read files from: the Python installation and packages,
    the staged kit and the data."""
    from nnkit.mnist import default_dir

    roots = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p}
    roots |= {Path(p) for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p)}
    roots.add(default_dir())
    return sorted(roots)


def kit_roots() -> list[Path]:
    import grader
    import nnkit

    return [Path(grader.__file__).parent, Path(nnkit.__file__).parent]


def confine(submission: Path, out: Path, scratch: Iterable[Path]) -> Any:
    """The last step of set-up, just before the submission is imported: seal the classes
    it will define (grader/worker/sealing.py), photograph the trusted modules, then arm
    the audit hook (grader/worker/guard.py) for the submission's folder, with `scratch`
    its only other writable place. Returns the photograph (tamper.Snapshot), to check
    before results are written."""
    from grader.worker import guard, sealing, tamper
    from nnkit.submission import package_name

    hook = guard.Guard(submission, kit_roots(), out / guard.GUARD_FILE, scratch,
                       read_roots() + [submission])
    sealing.install(submission)  # before the photograph: builtins changed by the kit
    snapshot = tamper.Snapshot()
    hook.arm(package_name(submission))
    return snapshot


def describe_error(err: BaseException, submission: Path | None) -> str:
    """'Type: message', plus the last line of the submission's code on the way, and the
    first one when that is in another of its files (a helper that raised on what a call in
    another module gave it: the call is where to look)."""
    try:
        text = f"{type(err).__name__}: {err}".strip()
    except Exception:  # noqa: BLE001 - a submission's exception whose str() fails
        text = type(err).__name__
    mine = []
    if submission is not None:
        for frame in traceback.extract_tb(err.__traceback__):
            # ("<frozen importlib._bootstrap>" is no file: resolved, it would seem to lie
            # in the working folder, which is the submission's)
            if not frame.filename.startswith("<") and Path(
                    frame.filename).resolve().is_relative_to(submission):
                mine.append(frame)
    where = ""
    if mine:
        last, first = mine[-1], mine[0]
        where = f" ({Path(last.filename).name}, line {last.lineno}: {last.line}"
        if first.filename != last.filename:
            where += (f"; called from {Path(first.filename).name}, line {first.lineno}: "
                      f"{first.line}")
        where += ")"
    return (text[:ERROR_CHARS] + where)[: ERROR_CHARS + 300] + _limit_hint(err)


def _limit_hint(err: BaseException) -> str:
    """Which of the sandbox's limits an error comes from, when it says so."""
    errno = getattr(err, "errno", None)
    if isinstance(err, MemoryError) and LIMITS.get("memory_mb"):
        return f" (the worker's memory limit is {LIMITS['memory_mb']} MB)"
    if (errno == 11 or "can't start new thread" in str(err)) and LIMITS.get("processes"):
        return (f" (the job may run {LIMITS['processes']} processes and threads at a time)")
    if errno == 27 and LIMITS.get("file_mb"):
        return f" (files are limited to {LIMITS['file_mb']} MB)"
    return ""


def save_error(path: Path, err: BaseException, submission: Path | None) -> None:
    path.write_text(describe_error(err, submission))


def save_launches(record: Any, replayed: dict | None) -> dict:
    """The launch counts of one call and, when it was replayed, the replay's outputs, as
    arrays to store beside the call's own (prefixes launch: and replay:)."""
    arrays = {"launch:own": np.array(record.own_launches, np.int64),
              "launch:other": np.array(record.other_launches, np.int64)}
    for name, value in (replayed or {}).items():
        if value is not None:
            arrays[f"replay:{name}"] = np.asarray(value)
        else:
            arrays[f"replay-missing:{name}"] = np.zeros(0, np.int8)
    return arrays
