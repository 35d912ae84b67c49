"""What grading produces: items with points, messages and figures, per submission."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

PASS, FAIL, PARTIAL, NOT_GRADED = "pass", "fail", "partial", "not graded"


@dataclass
class CaseOutcome:
    """The verdict on one case of an item, from a job's raw files (grader/checks/)."""

    label: str  # the case as a student reads it, e.g. "17x5x3 AB α=2 β=5"
    passed: bool  # within the bound (or as specified) on every rank and element
    message: str  # why it passed or failed, one line


@dataclass
class ItemResult:
    """One graded item of a submission, as grader/parts/ gives it points."""

    id: str  # "<part>.<what>", e.g. "gemm.naive.correctness", a key of the config
    title: str  # the config's title of the item
    max_points: float  # what it is worth
    points: float | None  # None: not graded in this run (it counts in no total)
    status: str  # PASS, FAIL, PARTIAL or NOT_GRADED
    message: str  # the one-line verdict students read first
    checks: list[dict] = field(default_factory=list)  # a row per case: case, passed, ...
    figures: dict = field(default_factory=dict)  # numbers for the feedback (times, norms)
    # Why the item is zeroed whatever its cases, if it is: a rule broken (the policy, a
    # library product, the guard, kernels that reproduce nothing) or a job whose results
    # are not trusted. None otherwise.
    integrity: str | None = None


@dataclass
class SubmissionResult:
    """Every item of one submission, and where and how it was graded."""

    name: str  # the submission's name (its folder's, or the student's)
    path: str  # the folder that was graded, or the notebook it was extracted from
    backend: str  # the GPU or the simulator, described
    items: list[ItemResult] = field(default_factory=list)  # in the order of the tasks

    @property
    def total(self) -> float:
        return sum(item.points for item in self.items if item.points is not None)

    @property
    def max_total(self) -> float:
        return sum(item.max_points for item in self.items if item.points is not None)

    def item(self, item_id: str) -> ItemResult:
        return next(item for item in self.items if item.id == item_id)

    def to_json(self) -> dict:
        data = asdict(self)
        data["total"] = self.total
        data["max_total"] = self.max_total
        return data


# How the note of a sub-folder graded as a submission of its own begins (a folder named
# on the command line that held no student module, only sub-folders that do).
NESTED_NOTE = "graded as one of the"
