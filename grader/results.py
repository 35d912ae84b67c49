"""What grading produces: items with points, messages and figures, per submission."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

PASS, FAIL, PARTIAL, NOT_GRADED = "pass", "fail", "partial", "not graded"


@dataclass
class ItemResult:
    id: str
    title: str
    max_points: float
    points: float | None  # None: not graded in this run (it counts in no total)
    status: str
    message: str
    checks: list[dict] = field(default_factory=list)
    figures: dict = field(default_factory=dict)


@dataclass
class SubmissionResult:
    name: str
    path: str
    backend: str
    items: list[ItemResult] = field(default_factory=list)

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
