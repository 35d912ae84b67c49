"""Part 3 grading: the solution gets every point, the starter none, and each buggy
submission of tests/bugs/mpi loses exactly its items; a deadlock is stopped in time."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from grader.cases import mpi as mpi_cases
from grader.cases import mpi_combined
from grader.checks import mpi as mpi_checks
from grader.examples import all_specs, materialize
from grader.parts import mpi_job
from grader.scoring import DEFAULT_CONFIG
from nnkit.collectives import find_mpiexec
from tests.conftest import KIT_ROOT, TESTS, run_kit
from tests.parts.test_grader import _assert_loses_its_items

BUGS = TESTS / "bugs" / "mpi"
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


@pytest.mark.slow  # the class of MPI bugs: `make test-all`
def test_solution_gets_every_mpi_point(graded):
    stdout, reports = graded
    items = reports["solution"]["items"]
    assert {i["id"] for i in items} == set(mpi_cases.ITEMS) | {mpi_combined.ITEM}
    assert all(i["points"] == i["max_points"] > 0 for i in items), items
    assert "Part 3, MPI" in stdout


@pytest.mark.slow  # the class of MPI bugs: `make test-all`
def test_starter_gets_zero_and_says_why(graded):
    for item in graded[1]["starter"]["items"]:
        assert item["points"] == 0 and "NotImplementedError" in item["message"]


@pytest.mark.slow
@pytest.mark.parametrize("spec", all_specs(BUGS), ids=lambda s: s.name)
def test_each_mpi_bug_loses_exactly_its_items(graded, spec):
    _assert_loses_its_items(graded[1][spec.name], spec)


@pytest.mark.slow  # the class of MPI bugs: `make test-all`
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
    run = mpi_job.run_mpi_job("ring", cases, submission, tmp_path / "job", 3, 4, inputs)
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


def test_the_worker_imports_nothing_of_the_grader_outside_it():
    from grader.isolation import sandbox

    assert sandbox.worker_imports_outside() == []


def test_each_rank_is_given_only_its_own_inputs_drawn_from_the_secret():
    scatter = mpi_cases.cases("scatter")
    per_rank = mpi_cases.rank_inputs("scatter", scatter, secret=7)
    for n, case in enumerate(scatter):  # the minibatch is in its root's file only
        holders = [r for r in range(mpi_cases.RANKS) if f"case-{n}/X" in per_rank[r]]
        assert holders == [case["root"]]
    for kind in ("train", "average"):  # the training set: rank 0's file only
        per_rank = mpi_cases.rank_inputs(kind, mpi_cases.cases(kind), secret=7)
        assert set(per_rank[0]) == {"train/images", "train/labels"}
        assert all(not arrays for arrays in per_rank[1:])
    ring = mpi_cases.cases("ring")
    one, two = (mpi_cases.rank_inputs("ring", ring, secret=s) for s in (7, 8))
    case = next(n for n, c in enumerate(ring) if c["ranks"] == 4)
    buffers = [one[r][f"case-{case}/buffer"] for r in range(4)]
    assert not any(np.array_equal(buffers[0], b) for b in buffers[1:])  # ranks differ
    assert not np.array_equal(buffers[0], two[0][f"case-{case}/buffer"])  # secrets too
    for n, c in enumerate(ring):  # a rank outside a case is given nothing of it
        assert all(f"case-{n}/buffer" not in one[r] for r in range(c["ranks"], 4))


@pytest.mark.parametrize("p", [2, 3, 4, 5])
def test_a_ring_with_uneven_chunks_meets_the_byte_bound(p):
    """Rank r of a ring sends 2n - c_(r+1) - c_(r+2) elements and receives 2n - c_r -
    c_(r+1): never less than the n of mpi_checks.ring_bytes_needed, with equality possible."""
    from nnkit.collectives import split_counts

    tightest = []
    for n in [*range(1, 3 * p), 1001, 100002]:
        c = split_counts(n, p)
        need = mpi_checks.ring_bytes_needed(n, p) // 4
        for r in range(p):
            sent = 2 * n - c[(r + 1) % p] - c[(r + 2) % p]
            received = 2 * n - c[r] - c[(r + 1) % p]
            assert min(sent, received) >= need == n, (n, r, c)
            tightest.append(min(sent, received) == need)
    assert any(tightest)


@pytest.mark.parametrize("p", [3, 4, 5, 8])
def test_chunked_rings_stay_under_the_upper_byte_bound_and_a_relay_does_not(p):
    """Splits into chunks of floor(n/p) with the remainder spread (the kit's), of ceil(n/p)
    with a short last one, and of floor(n/p) with the remainder in the last: every rank's
    bytes under ring_bytes_allowed. A relay of the whole buffer sends 2n from a rank."""
    from nnkit.collectives import split_counts

    for n in [p * p, p * p + 1, 1001, 3001, 100002]:
        allowed = mpi_checks.ring_bytes_allowed(n, p) // 4
        ceil = -(-n // p)
        splits = [split_counts(n, p),
                  [min(ceil, max(0, n - k * ceil)) for k in range(p)],
                  [n // p] * (p - 1) + [n - (p - 1) * (n // p)]]
        for c in splits:
            assert sum(c) == n
            for r in range(p):
                sent = 2 * n - c[(r + 1) % p] - c[(r + 2) % p]
                received = 2 * n - c[r] - c[(r + 1) % p]
                assert max(sent, received) <= allowed, (n, r, c)
        assert 2 * n > allowed  # the relay's busiest ranks
    assert mpi_checks.ring_bytes_allowed(1001, 2) is None  # p = 2: a relay is a ring
    assert mpi_checks.ring_bytes_allowed(p * p - 1, p) is None


@pytest.mark.parametrize("p", [2, 3, 4, 5])
def test_only_a_ring_passes_the_neighbour_rule(p):
    """Bytes sent, rank by rank (row: from, column: to): a ring either way round passes;
    a gather and broadcast through rank 0, and everyone sending to everyone, fail on 4
    ranks or more (on 2 and 3, every other rank is a neighbour)."""
    right = np.zeros((p, p), np.int64)
    for r in range(p):
        right[r, (r + 1) % p] = 8
    star = np.zeros((p, p), np.int64)
    star[0, 1:], star[1:, 0] = 4, 4
    everyone = np.full((p, p), 4, np.int64) - 4 * np.eye(p, dtype=np.int64)
    assert mpi_checks.not_to_neighbours(right) == ""
    assert mpi_checks.not_to_neighbours(right.T.copy()) == ""  # turning the other way
    for astray in (star, everyone):
        said = mpi_checks.not_to_neighbours(astray)
        assert (said != "") == (p >= 4), said
        assert p < 4 or "the ring must pass data between neighbours only" in said


COUNTING = r'''
import array, json
import numpy as np
from mpi4py import MPI
from nnkit.collectives import CountingComm, call_point_to_point, message_bytes

self, out = MPI.COMM_SELF, {}
b, r, status = np.arange(10, dtype=np.float32), np.zeros(64, np.float32), MPI.Status()
pair = MPI.FLOAT.Create_contiguous(2).Commit()
specs = [b, [b, MPI.FLOAT], [b, 3], [b, 3, MPI.FLOAT], [b, (3, 2), MPI.FLOAT],
         [b, 3, 2, MPI.FLOAT], [b, "f"], [b, (3, 2)], (b, 4), [b, None, MPI.FLOAT],
         b.tobytes(), array.array("d", [1, 2, 3]), [b, pair], [b, 2, pair],
         [MPI.BOTTOM, 0, MPI.FLOAT], memoryview(b)[2:]]
out["p2p"] = []
for spec in specs:  # what MPI itself says arrived, against the kit's count
    self.Sendrecv(spec, 0, recvbuf=r, source=0, status=status)
    out["p2p"].append([status.Get_count(MPI.BYTE), message_bytes(spec)])
counted = CountingComm(self)
X, got = np.arange(12, dtype=np.float32), np.zeros(12, np.float32)
for spec in ([X, ([12], [0]), MPI.FLOAT], [X, [12], [0], MPI.FLOAT], [X, ([12], [0])],
             [X, MPI.FLOAT], X):  # mpi4py's vector specs, the issue-13 one first
    counted.Scatterv(spec, got, root=0)
out["scatterv"] = [counted.unknown, counted.calls["Scatterv"], got.tolist() == X.tolist()]

def snoop(comm, buffer):
    tried = {}
    for name in ("Allreduce", "Allgather", "bcast", "Dup", "Split", "Abort", "_comm"):
        try:
            getattr(comm, name)
            tried[name] = "given"
        except AttributeError as err:
            tried[name] = type(err).__name__
    # What the methods' closures hold (the probes' hold their own names): no communicator.
    inside = [[type(c.cell_contents).__name__ for c in getattr(v, "__closure__", None) or ()]
              for v in vars(type(comm)).values()]
    comm.Sendrecv(buffer, 0, recvbuf=np.empty_like(buffer), source=0)
    comm.Send(buffer, MPI.PROC_NULL)
    try:  # a spec nobody can read: MPI refuses it, the kit only notes it
        comm.Isend([buffer, 1, 2, 3, MPI.FLOAT], 0)
    except ValueError as err:
        tried["bad spec"] = str(err)[:80]
    try:  # a value the kit and MPI might read differently: refused before either reads it
        comm.Isend([buffer, object()], 0)
    except TypeError as err:
        tried["not plain"] = type(err).__name__
    return tried, inside

out["tally"] = call_point_to_point(lambda c, x: out.update(snoop=snoop(c, x)), self, b)
print(json.dumps(out, default=str))
'''


def test_counting_reads_every_buffer_spec_and_hides_the_communicator():
    """The kit's counts agree with what MPI delivered for every point-to-point spec form;
    CountingComm takes every Scatterv spec (issue 13: [buf, (counts, displs), type] made it
    raise inside the student's call); the ring's communicator refuses collectives and
    holds no reference to the real one."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", COUNTING], capture_output=True, text=True,
                          timeout=120, cwd=KIT_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(mpi == kit for mpi, kit in out["p2p"]), out["p2p"]
    assert out["scatterv"] == [0, 5, True]
    tried, closures = out["snoop"]
    assert "bad spec" in tried  # refused by MPI, in the call
    assert tried.pop("not plain") == "NotPlainArgument"
    del tried["bad spec"]
    assert tried == {name: "PointToPointOnly" for name in tried}
    assert all(kinds in ([], ["str"]) for kinds in closures), closures
    tally = out["tally"]
    assert tally["sent_to"] == [40] and tally["unknown"] == 1 and tally["problems"]
    assert tally["calls"] == {"Sendrecv": 1, "Send": 1, "Isend": 1}


def test_an_abort_inside_an_mpi_call_is_told_in_mpis_words(tmp_path):
    """MPICH's own abort line names the call; Hydra's banner after it only says a rank
    died (found with labels of another dtype than the MPI type given with them)."""
    tail = ("Assertion failed in file src/mpi/datatype/typerep/src/typerep_yaksa_pack.c at "
            "line 41: element_size\n"
            "===================================================================\n"
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
            "=   PID 6 RUNNING AT vm\n=   EXIT CODE: 9\n"
            "===================================================================\n")
    run = mpi_job.MpiRun(tmp_path, 9, False, tail, 1.0, 2)
    said = run.missing(0, 40)
    assert "Assertion failed in file" in said and "dtype matches the MPI type" in said, said
    banner = mpi_job.MpiRun(tmp_path, 9, False, tail.split("\n", 1)[1], 1.0, 2)
    assert "BAD TERMINATION" in banner.missing(0, 40)
    # The worker's own abort after a rank raised is not MPI's word on a call.
    ours = ("Abort(3) on node 0 (rank 0 in comm 0): application called "
            "MPI_Abort(MPI_COMM_WORLD, 3) - process 0\n" + tail.split("\n", 1)[1])
    said = mpi_job.MpiRun(tmp_path, 9, False, ours, 1.0, 2).missing(0, 40)
    assert "dtype matches" not in said and "BAD TERMINATION" in said, said


def test_a_ring_without_its_all_gather_is_told_so():
    """A ring that stops after the reduce-scatter (a realistic bug): each rank holds one
    chunk of the sum. Rank 0's chunk may be empty (1 element on 2 ranks), its buffer then
    unchanged while the others' changed: the hint names the missing all-gather either way,
    not "sum in place"."""
    p, n = 3, 9
    inputs = [np.arange(n, dtype=np.float32) + 10 * r for r in range(p)]
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    bound = np.full(n, 1e-3)
    partial = inputs[1].copy()
    partial[3:6] = exact[3:6]
    got = [{"got": inputs[0].copy()}, {"got": partial}, {"got": inputs[2] + 1}]
    hint = mpi_checks.ring_hint(got, inputs, 1, exact, bound)
    assert "only elements 3..5, one chunk of 3, hold the sum" in hint and "all-gather" in hint
    assert "other ranks' changed" in mpi_checks.ring_hint(got, inputs, 0, exact, bound)
    alone = [{"got": x.copy()} for x in inputs]
    assert "sum in place" in mpi_checks.ring_hint(alone, inputs, 0, exact, bound)
