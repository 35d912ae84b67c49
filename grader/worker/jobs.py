"""What a worker is told: one dataclass per kind of job.

The grader builds a job (grader/parts/), the runner adds the sandbox's share
(grader/isolation/runner.py: where results go, limits, thread stacks) and writes it as
`job.json`; the worker reads it back with `Job.from_json` before anything submitted runs,
then removes the file. Cases travel as descriptions only: their values are in the job's
input file, and the seeds that chose them stay with the grader.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True, kw_only=True)
class Job:
    """What every job carries."""

    kind: str  # which of the worker's jobs runs (KINDS below)
    submission: str | None = None  # the submission's private copy; None: the kit's own code
    outdir: str = ""  # where the worker writes its raw files (set by the runner)
    inputs: str | None = None  # the input arrays' file in the job's folder, removed once read
    limits: dict[str, int] = field(default_factory=dict)  # the sandbox's, for messages only
    thread_stack_kb: int = 0  # stacks of the simulator's threads (0: Python's default)
    cprofile: bool = False  # GRADER_CPROFILE: profile the worker, for the kit's developers
    window: list[int] | None = None  # descriptors of the timing-window channel, if any

    KINDS: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Job:
        """The job `raw` describes; ValueError for an unknown kind or field."""
        kind = raw.get("kind")
        cls = next((c for c in _CLASSES if kind in c.KINDS), None)
        if cls is None:
            raise ValueError(f"unknown job kind {kind!r}")
        unknown = set(raw) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown field(s) of a {kind} job: {', '.join(sorted(unknown))}")
        return cls._parse(raw)

    @classmethod
    def _parse(cls, raw: dict[str, Any]) -> Job:
        return cls(**raw)


@dataclass(frozen=True)
class TimedKernel:
    """One kernel of a timed GEMM job."""

    kernel: str  # naive, shared, register, hierarchical (grader/parts/gemm.py's KERNELS)
    module: str  # the submission's module that defines it
    function: str  # its launcher
    perf_seed: int  # seed of its timed calls' factors, from the run's secret


@dataclass(frozen=True, kw_only=True)
class GemmJob(Job):
    """A GEMM launcher on its correctness cases (then its timed ones, if any); or, with
    `timed`, several launchers on the timed cases only."""

    KINDS: ClassVar[tuple[str, ...]] = ("gemm",)
    kind: str = "gemm"
    module: str | None = None  # the launcher's module (or "cublas"); None with `timed`
    function: str | None = None  # the launcher
    cases: list[dict] = field(default_factory=list)  # GemmCase.to_json, in order
    perf: list[dict] = field(default_factory=list)  # the timed cases, GemmCase.to_json
    repeats: int = 0  # timed calls per timed case
    warmup: int = 0  # untimed calls before them
    replay: list[int] = field(default_factory=list)  # cases whose launches are run again
    perf_seed: int | None = None  # seed of the timed calls' factors (one launcher)
    counted: int | None = None  # the case whose memory traffic is counted (simulator)
    profile: dict | None = None  # an extra counted call, GemmCase.to_json (simulator)
    timed: list[TimedKernel] = field(default_factory=list)  # launchers timed in turn

    @classmethod
    def _parse(cls, raw: dict[str, Any]) -> Job:
        timed = [TimedKernel(**t) for t in raw.get("timed", [])]
        return cls(**{**raw, "timed": timed})


@dataclass(frozen=True, kw_only=True)
class NetJob(Job):
    """The network's unit cases (net_units), its training runs (net_train) or its timed
    training (net_speed)."""

    KINDS: ClassVar[tuple[str, ...]] = ("net_units", "net_train", "net_speed")
    cases: list[dict] = field(default_factory=list)  # net_units: grader/cases/net.py's
    replay: list[int] = field(default_factory=list)  # net_units: cases recorded in full
    data: dict | None = None  # net_train, net_speed: the images (grader/parts/net.py's plan)
    modes: list[dict] = field(default_factory=list)  # net_train: TrainConfig fields per run
    mode: dict | None = None  # net_speed: the timed run's TrainConfig fields
    # The steps recorded in full: per mode (net_train) or for the one run (net_speed).
    audit_calls: list = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class MpiJob(Job):
    """The cases of one Part 3 item, run by every rank (grader/worker/mpi.py); or, as kind
    "items", several items' cases one item after the other in one job."""

    KINDS: ClassVar[tuple[str, ...]] = ("scatter", "allreduce", "train", "ring", "average",
                                        "combined", "items")
    cases: list[dict] = field(default_factory=list)  # grader/cases/mpi.py's, in order
    items: list[dict] = field(default_factory=list)  # kind "items": {"kind", "cases"} each
    ranks_dir: str = ""  # holds rank-R/: each rank's submission copy, scratch and inputs


@dataclass(frozen=True, kw_only=True)
class NotebookJob(Job):
    """The check() calls of an nbgrader course's test cells, in order
    (grader/worker/nbtests.py)."""

    KINDS: ClassVar[tuple[str, ...]] = ("nbtests",)
    kind: str = "nbtests"
    checks: list[dict] = field(default_factory=list)  # function, module, cases, seed each


_CLASSES: tuple[type[Job], ...] = (GemmJob, NetJob, MpiJob, NotebookJob)
