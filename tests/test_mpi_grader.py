"""Part 3 grading: the solution gets every point, the starter none, and each buggy
submission of tests/bugs/mpi loses exactly its items; a deadlock is stopped in time."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from grader import mpi_cases, part3
from grader.examples import all_specs, materialize
from grader.scoring import DEFAULT_CONFIG
from nnkit.collectives import find_mpiexec
from tests.conftest import run_kit
from tests.test_grader import _assert_loses_its_items

BUGS = Path(__file__).parent / "bugs" / "mpi"
LIMIT = 15  # seconds per MPI job here: the solution's take 1-3 s on a 2-core machine

pytestmark = pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("mpi-grades")
    config = root / "config.toml"
    config.write_text(DEFAULT_CONFIG.read_text().replace("\nseconds = 90\n",
                                                         f"\nseconds = {LIMIT}\n"))
    assert f"seconds = {LIMIT}" in config.read_text()
    out = root / "out"
    result = run_kit("grader", "solution", "starter", "--bugs", str(BUGS), "--parts", "mpi",
                     "--config", str(config), "--out", str(out), "--jobs", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}


def test_solution_gets_every_mpi_point(graded):
    stdout, reports = graded
    items = reports["solution"]["items"]
    assert {i["id"] for i in items} == set(mpi_cases.ITEMS)
    assert all(i["points"] == i["max_points"] > 0 for i in items), items
    assert "Part 3, MPI" in stdout


def test_starter_gets_zero_and_says_why(graded):
    for item in graded[1]["starter"]["items"]:
        assert item["points"] == 0 and "NotImplementedError" in item["message"]


@pytest.mark.parametrize("spec", all_specs(BUGS), ids=lambda s: s.name)
def test_each_mpi_bug_loses_exactly_its_items(graded, spec):
    _assert_loses_its_items(graded[1][spec.name], spec)


def test_a_deadlock_is_stopped_at_the_limit_and_named(graded):
    ring = next(i for i in graded[1]["ring_send_before_recv"]["items"] if i["id"] == "mpi.ring")
    assert "deadlock" in ring["message"] and f"{LIMIT} s time limit" in ring["message"]
    assert ring["figures"]["timed_out"] and ring["figures"]["job_seconds"] < LIMIT + 10
    # The cases before the large buffer passed: small messages are buffered by MPI.
    assert ring["checks"][0]["passed"] and ring["checks"][1]["passed"]


def test_a_killed_job_leaves_no_process_behind(tmp_path):
    """run_mpi_job on a deadlocking ring: stopped at its limit, and every process of the
    job (mpiexec, Hydra's proxy, the ranks, each in a session of its own) is gone."""
    spec = next(s for s in all_specs(BUGS) if s.name == "ring_send_before_recv")
    submission = materialize(spec, tmp_path / "source")
    cases = [{"ranks": 3, "length": 300000, "seed": 1}]
    inputs = mpi_cases.rank_inputs("ring", cases, secret=5, ranks=3)
    start = time.perf_counter()
    run = part3.run_mpi_job("ring", cases, submission, tmp_path / "job", 3, 4, inputs)
    assert run.timed_out and time.perf_counter() - start < 4 + 10
    assert "deadlock" in run.missing(0, 4)
    time.sleep(0.5)
    job_file = str(tmp_path / "job")
    left = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if job_file in cmdline and int(entry.name) != os.getpid():
            left.append(cmdline.replace("\0", " "))
    assert not left, left
