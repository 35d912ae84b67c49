"""Gradescope's results.json for one graded submission.

The format is Gradescope's autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): top-level `score`,
optional `execution_time`, `output`, `visibility`, `stdout_visibility`, `extra_data`,
`tests` and `leaderboard`. Each item of the result becomes one test.

Items not graded in this run (`points` null, e.g. performance on a machine without a GPU)
stay in the list, with score 0 and max_score 0 and an output saying why; they carry the
tag "not graded". They are kept rather than omitted so that the student sees that the item
exists and why it has no points yet, and they are worth 0 rather than their real
max_points so that they do not lower the score: the score and the sum of the tests'
max_score are then the run's `total` and `max_total`. The score shown to the student is
measured against the assignment's autograder points set on Gradescope, so set those to the
points that the Gradescope machine can grade (`extra_data.max_total`).

Every output is sent as plain text (`output_format` and `test_output_format` "text"),
since messages come from students' code and Gradescope would otherwise render the
top-level output as HTML.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from grader.reports.reading import (
    check_columns,
    check_failed,
    failures_first,
    normalize,
    not_graded_note,
    total_text,
)
from grader.reports.text import finite, format_value, label, shorten
from grader.results import PASS

RESULTS_JSON = Path("/autograder/results/results.json")
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
OUTPUT_LIMIT = 20_000  # characters of one test's output


def _text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(headers, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    return "\n".join(lines)


def _test_output(item: dict) -> str:
    """The item's message, then its checks as a plain-text table, failures first."""
    parts = [item["message"]] if item["message"] else []
    checks = item["checks"]
    if checks:
        columns = check_columns(checks)
        rows = [[shorten(format_value(k, c.get(k)), 120) for k in columns]
                for c in failures_first(checks)]
        failed = sum(check_failed(c) for c in checks)
        parts.append(f"{len(checks)} checks" + (f", {failed} failing:" if failed else ":"))
        parts.append(_text_table([label(k) for k in columns], rows))
    text = "\n\n".join(parts)
    return text if len(text) <= OUTPUT_LIMIT else text[: OUTPUT_LIMIT - 1] + "…"


def _tags(item_id: str) -> list[str]:
    """"gemm.naive.correctness" -> ["gemm", "gemm.naive", "gemm.naive.correctness"]."""
    parts = item_id.split(".")
    return [".".join(parts[: n + 1]) for n in range(len(parts))]


def _test(n: int, item: dict, visibility: str) -> dict:
    test = {"name": item["title"], "number": str(n), "output": _test_output(item),
            "output_format": "text", "tags": _tags(item["id"]), "visibility": visibility,
            "extra_data": {"id": item["id"], "status": item["status"]}}
    if item["points"] is None:
        why = item["message"] or "not graded in this run"
        test.update(score=0.0, max_score=0.0, tags=[*test["tags"], "not graded"],
                    output=f"Not graded in this run; it does not count in the score. ({why})")
    else:
        test.update(score=round(item["points"], 4), max_score=round(item["max_points"], 4),
                    status="passed" if item["status"] == PASS else "failed")
    return test


def leaderboard(result: dict) -> list[dict]:
    """GFLOP/s of each kernel at each benchmark case, from the checks that carry `gflops`
    (performance items), named "<item id without .performance> <case> GFLOP/s"."""
    board = []
    for item in normalize(result)["items"]:
        kernel = item["id"].removesuffix(".performance")
        for n, check in enumerate(item["checks"]):
            gflops = finite(check.get("gflops"))
            if gflops is not None:
                case = shorten(check.get("case", f"#{n + 1}"), 60)
                board.append({"name": f"{kernel} {case} GFLOP/s", "value": round(gflops, 1),
                              "order": "desc"})
    return board


def _json_safe(value: object) -> object:
    """NaN and infinities as None: Gradescope's JSON parser accepts neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def gradescope_results(result: dict, *, visibility: str = "visible",
                       stdout_visibility: str = "hidden",
                       execution_time: float | None = None) -> dict:
    """Gradescope's results.json for one result (the dict of SubmissionResult.to_json()).

    `visibility` applies to the whole result and to each test; `stdout_visibility` to the
    autograder's stdout (hidden by default: it can show the grader's paths and logs);
    `execution_time` (seconds) is included when given. Not-graded items count 0 of 0 (see
    the module docstring). `score` is the sum of the tests' scores.
    """
    for value in (visibility, stdout_visibility):
        if value not in VISIBILITIES:
            raise ValueError(f"visibility {value!r}: choose from {', '.join(VISIBILITIES)}")
    data = normalize(result)
    tests = [_test(n, it, visibility) for n, it in enumerate(data["items"], 1)]
    graded = [it for it in data["items"] if it["points"] is not None]
    output = [f"Submission: {data['name']}", f"Backend: {data['backend']}",
              f"Total: {total_text(data)}"]
    note = not_graded_note(data)
    if note:
        output.append(note)
    output += [f"Note: {n}" for n in data["notes"]]
    out = {
        "score": round(sum(t["score"] for t in tests), 4),
        "output": "\n".join(output),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": visibility,
        "stdout_visibility": stdout_visibility,
        "extra_data": {"submission": data["name"], "backend": data["backend"],
                       "total": data["total"], "max_total": data["max_total"],
                       "graded": [it["id"] for it in graded],
                       "not_graded": [it["id"] for it in data["items"]
                                      if it["points"] is None]},
        "tests": tests,
        "leaderboard": leaderboard(result),
    }
    if execution_time is not None:
        out["execution_time"] = max(0, round(execution_time))
    return _json_safe(out)


def write_gradescope(result: dict, path: Path = RESULTS_JSON, **options: object) -> Path:
    """Write gradescope_results(result, **options) to `path` (by default where Gradescope
    reads it, /autograder/results/results.json) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = gradescope_results(result, **options)
    path.write_text(json.dumps(data, indent=2, allow_nan=False), encoding="utf-8")
    return path
