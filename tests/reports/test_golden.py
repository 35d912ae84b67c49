"""Verdicts and messages unchanged: a few bundled submissions graded with a fixed seed,
compared with the JSON reports kept in tests/golden/reports.json.

The golden file was written by the grader as it stood before its modules moved into stage
folders, so a pass proves that a reorganisation kept every verdict. What legitimately
differs between runs is left out: the date, the submission's path and the seconds a job
took. Regenerate after a deliberate change of a verdict or message with
`GOLDEN_UPDATE=1 python -m pytest tests/test_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grader.examples import load_spec, materialize
from tests.conftest import KIT_ROOT, TESTS, run_kit

GOLDEN = TESTS / "golden" / "reports.json"
SEED = "20251124"

# (part, extra options, submissions): each submission is graded in one part only, so that
# the whole stays near two minutes on two cores. "bug:<toml>" is made from the solution
# by that spec; any other name is a folder of the kit (or 'solution', 'starter').
RUNS = [
    ("gemm", ["--kernels", "naive"],
     ["solution", "starter", "bug:examples/bugs/naive_beta_ignored.toml",
      "bug:tests/bugs/checker/gemm/naive_negative_index.toml",
      "tests/cheats/matmul_operator"]),
    ("net", [],
     ["solution", "starter", "bug:tests/bugs/net/sigmoid_grad_from_z.toml"]),
    # Not the starter in Part 3: when every rank raises, which rank's error the job
    # reports first is a race between the ranks (their messages differ from run to run).
    ("mpi", [],
     ["solution", "bug:tests/bugs/mpi/scatter_drops_remainder.toml",
      "bug:tests/bugs/mpi/unweighted_average.toml",
      "bug:tests/bugs/mpi/ring_send_before_recv.toml"]),
]

DROPPED = {"graded_at", "path"}  # differ between runs, never a verdict


def _normal(value: object) -> object:
    """The report without what differs between two runs of the same grading."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()
                if k not in DROPPED and not k.endswith("seconds")}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _grade(tmp: Path) -> dict:
    reports: dict = {}
    for part, options, names in RUNS:
        folders = []
        for name in names:
            if name.startswith("bug:"):
                spec = load_spec(KIT_ROOT / name[4:])
                folders.append(str(materialize(spec, tmp / "bugs" / part)))
            else:
                folders.append(name)
        out = tmp / f"out-{part}"
        done = run_kit("grader", *folders, "--parts", part, *options, "--seed", SEED,
                       "--jobs", "2", "--out", str(out))
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        for path in sorted(out.glob("*.json")):
            report = json.loads(path.read_text())
            reports[f"{part}/{report['id']}"] = _normal(report)
    return reports


@pytest.mark.slow
def test_reports_match_golden(tmp_path: Path) -> None:
    got = _grade(tmp_path)
    if os.environ.get("GOLDEN_UPDATE"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], f"{key} differs from tests/golden/reports.json"
