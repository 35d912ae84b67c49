"""What the three parts share when they turn a job's outcomes into items: a fresh copy of
the submission per job, and the all-or-nothing item with its one-line message."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from grader.isolation.runner import copy_submission
from grader.results import FAIL, PASS, CaseOutcome, ItemResult
from grader.scoring import Config


def fresh_copy(workdir: Path, submission: Path) -> Path:
    """workdir emptied, and the submission copied into workdir/submission: what one job
    changes in its copy is never seen by another job, nor by the checks of the source."""
    if workdir.exists():
        shutil.rmtree(workdir)
    return copy_submission(submission, workdir / "submission")


def failure_message(failures: Sequence[CaseOutcome | dict], total: int, noun: str = "cases") -> str:
    """The message 'N of M cases fail; first: <case>: <why>'. A failure is an outcome
    (.label and .message) or a check row (a dict with "case" and "message")."""
    first = failures[0]
    if isinstance(first, dict):
        label, why = first["case"], first["message"]
    else:
        label, why = first.label, first.message
    return f"{len(failures)} of {total} {noun} fail; first: {label}: {why}"


def check_rows(outcomes: Sequence[CaseOutcome]) -> list[dict]:
    """The checks of an item, one row per case outcome (.label, .passed, .message)."""
    return [{"case": o.label, "passed": o.passed, "message": o.message} for o in outcomes]


def all_or_nothing(item_id: str, config: Config, ok: bool, message: str,
                   **extra: object) -> ItemResult:
    """The item with all its points when ok, else none (checks=, figures= pass through)."""
    points = config.points(item_id)
    return ItemResult(item_id, config.title(item_id), points, points if ok else 0.0,
                      PASS if ok else FAIL, message, **extra)
