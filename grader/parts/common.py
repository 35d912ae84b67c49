"""What the three parts share when they turn a job's outcomes into items: a fresh copy of
the submission per job, and the item with its one-line message, all-or-nothing or with
partial credit per case as the config says (`credit`, grader/scoring.py)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from grader.checks.gemm import NO_KERNEL, NOT_REPRODUCED, NOT_REPRODUCED_ON_NEW, OTHER_KERNELS
from grader.isolation.runner import copy_submission
from grader.results import FAIL, PARTIAL, PASS, CaseOutcome, ItemResult
from grader.scoring import Config, partial_points

# Case verdicts that say the submission cheated or broke the rules, not that it computed
# a wrong value: one of them zeroes the whole item, partial credit or not, since the cases
# that "passed" beside it prove nothing (a result computed on the host passes every case
# that is not replayed). Fragments of the checks' own messages (grader/checks/).
INTEGRITY_MARKS = (
    NO_KERNEL,
    NOT_REPRODUCED.split("{why}")[0],
    NOT_REPRODUCED_ON_NEW.split("{why}")[0],
    OTHER_KERNELS.split(" (")[0],
    "launched none of the submission's kernels",
    "returned the previous call's result",
    "modified its input",
    "the ring must",  # Part 3: a collective, or too few bytes moved, in the ring
)


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


def integrity_failure(message: str) -> bool:
    """Does a failed case's message say it broke the rules (INTEGRITY_MARKS)?"""
    return any(mark in message for mark in INTEGRITY_MARKS)


def _counts(cases: Sequence[CaseOutcome | dict]) -> tuple[int, int, str | None]:
    """(passed, total, the first integrity failure's message or None) of an item's cases."""
    passed, broken = 0, None
    for check in cases:
        ok, why = ((check.get("passed"), check.get("message", "")) if isinstance(check, dict)
                   else (check.passed, check.message))
        passed += ok is True
        if ok is not True and broken is None and integrity_failure(str(why)):
            broken = str(why)
    return passed, len(cases), broken


def graded_item(item_id: str, config: Config, cases: Sequence[CaseOutcome | dict],
                message: str, problem: str | None = None, **extra: object) -> ItemResult:
    """An item decided by its cases (outcomes or check rows), credited as the
    config's `credit` says: "all", its points when every case passes; "partial", points x
    passed / cases. `problem` (the anticheat's or the guard's verdict, a job that did not
    complete) and any case that broke the rules (integrity_failure) zero the item either
    way. `message` is the verdict to show; partial credit prefixes the count and points."""
    passed, total, broken = _counts(cases)
    if problem or broken or config.credit(item_id) == "all" or not total:
        ok = not problem and not broken and passed == total
        return all_or_nothing(item_id, config, ok, message,
                              integrity=problem or broken or None, **extra)
    points = config.points(item_id)
    got = partial_points(points, passed, total)
    status = PASS if passed == total else FAIL if passed == 0 else PARTIAL
    said = f"{passed} of {total} cases: {got:g} / {points:g}"
    return ItemResult(item_id, config.title(item_id), points, got, status,
                      f"{said}; {message}" if passed < total else message, **extra)
