"""The jailed half of a notebook's test cell: `python -m grader.worker.nbtests JOB.json`.

grader/course/nbcourse.py grades an nbgrader test cell (`check("gemm_naive", gemm_naive)` and
its hidden `check(..., cases)`) without running the student's notebook: this worker, in
the sandbox, loads the student's function from the module extracted from the notebook
and runs nnkit.checks.check on it, recording every call of the function: the arrays of
its arguments after the call and what it returned (`call-C-N.json` + `call-C-N.npz` for
the N-th call of the cell's C-th check), the error it raised (`call-C-N.err`), or why
the module did not load (`load-C.err`). It decides nothing (its own comparisons are
switched off, so that every case runs): the grader replays the recordings through the
same checks in its own process, on inputs it builds itself. Whatever the submission does
to this process (replacing `check`, the comparisons, the inputs) can only spoil its own
recordings.

As in every job of the kit, the submission runs under the audit hook
(grader/worker/guard.py), the trusted modules are photographed before it is imported
(grader/worker/tamper.py), and each recorded call carries the number of the
submission's own kernels it launched (grader/worker/launches.py): a call that launched
none is not the student's kernel at work, and the grader fails it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from grader.worker.jobs import Job, NotebookJob


def is_array(value: Any) -> bool:
    """A NumPy, CuPy or numba (real or simulated) array."""
    return isinstance(value, np.ndarray) or (
        hasattr(value, "shape") and (hasattr(value, "copy_to_host") or hasattr(value, "get")))


def encode(value: Any, key: str, arrays: dict[str, np.ndarray]) -> Any:
    """A JSON tree of value: arrays go to `arrays` under their key; lists and tuples are
    followed; anything else (scalars, functions) is not recorded."""
    from nnkit.backend import to_host

    if isinstance(value, (list, tuple)):
        return {"seq": [encode(v, f"{key}.{i}", arrays) for i, v in enumerate(value)],
                "tuple": isinstance(value, tuple)}
    if is_array(value):
        host = np.asarray(to_host(value))
        if host.dtype.hasobject:
            return None
        arrays[key] = host
        return {"array": key}
    return None


def describe_error(err: BaseException, submission: Path) -> str:
    """'Type: message', plus the last line of the submission's code on the way."""
    where = ""
    for frame in traceback.extract_tb(err.__traceback__):
        if Path(frame.filename).resolve().is_relative_to(submission):
            where = f" ({Path(frame.filename).name}, line {frame.lineno}: {frame.line})"
    return (f"{type(err).__name__}: {err}".strip() + where)[:1800]


class Recorder:
    """Stands in for the student's function: calls it, then records the call."""

    def __init__(self, fn: Any, out: Path, submission: Path, check: int, launches: Any,
                 snapshot: Any):
        """check: the number of the test cell's check() call this is for."""
        self.fn, self.out, self.submission = fn, out, submission
        self.stem, self.calls = f"call-{check}", 0
        self.launches, self.snapshot = launches, snapshot

    def __call__(self, *args: Any) -> Any:
        from grader.worker.launches import COUNT

        name = f"{self.stem}-{self.calls}"
        self.calls += 1
        self.launches.begin(COUNT)
        try:
            try:
                result = self.fn(*args)
            finally:
                own = self.launches.end().own_launches
            self.snapshot.check()  # a replaced check or comparison is the student's doing
        except BaseException as err:
            (self.out / f"{name}.err").write_text(describe_error(err, self.submission))
            raise
        arrays: dict[str, np.ndarray] = {}
        tree = {"args": [encode(a, f"a{i}", arrays) for i, a in enumerate(args)],
                "result": encode(result, "r", arrays), "own_launches": own}
        np.savez(self.out / f"{name}.npz", **arrays)
        (self.out / f"{name}.json").write_text(json.dumps(tree))  # last: the call is whole
        return result


def run(job: NotebookJob) -> None:
    from grader.worker import launches
    from grader.worker.common import confine
    from nnkit.backend import cuda, select

    backend = select()
    del cuda  # numba loads before anything submitted can
    from nnkit import checks
    from nnkit.checks import check  # bound before any submitted code runs
    from nnkit.submission import load_function

    out = Path(job.outdir)
    submission = Path(job.submission).resolve()
    sys.path.append(str(submission))  # last (the worker runs with -P)
    # Every case is run and recorded, right or wrong: the verdicts are the grader's.
    checks._close = lambda *args, **kwargs: None
    counter = launches.Recorder(submission, backend.on_gpu)
    counter.install()
    snapshot = confine(submission, out, [Path(os.environ.get("TMPDIR", "/tmp"))])
    for number, call in enumerate(job.checks):
        try:
            fn = load_function(submission, call["module"], call["function"])
        except BaseException as err:  # noqa: BLE001 - any failure of student code is reported
            (out / f"load-{number}.err").write_text(describe_error(err, submission))
            continue
        recorder = Recorder(fn, out, submission, number, counter, snapshot)
        cases = None if call["cases"] is None else [tuple(c) for c in call["cases"]]
        try:
            check(call["function"], recorder, cases, call["seed"])
        except BaseException:  # noqa: BLE001, S110 - the grader decides, from the recordings
            pass


def main(argv: list[str]) -> int:
    job = Job.from_json(json.loads(Path(argv[1]).read_text()))
    if not isinstance(job, NotebookJob):
        raise ValueError(f"not a notebook job: {job.kind}")
    if job.thread_stack_kb:  # the simulator's thread per CUDA thread: small stacks
        threading.stack_size(job.thread_stack_kb * 1024)
    run(job)
    (Path(job.outdir) / "done").write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
