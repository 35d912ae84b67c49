"""The combined item (mpi.combined): the submission's Part 2 network trained under its
Part 3 functions on 2 ranks. The solution passes; a Part 3 bug, a Part 2 bug and a
submission whose ranks never communicate each lose it, and the message names the part at
fault. Each grading is one 2-rank MPI job in the simulator (about 8 s on 2 cores)."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from grader.cases import mpi_combined as cases
from grader.checks.mpi_combined import check_combined, split_tolerance
from grader.checks.net import AGREEMENT_TOL
from grader.examples import load_spec, materialize
from grader.scoring import load_config
from nnkit import network
from nnkit.collectives import find_mpiexec
from nnkit.gemm_reference import gamma
from tests.conftest import KIT_ROOT, TESTS, selected_values

BUGS = TESTS / "bugs" / "mpi"
CHEAT = TESTS / "cheats_mpi" / "no_communication"
SECRET = 11

# name -> where the submission comes from: a folder, or a bug spec applied to the solution
SUBMISSIONS = {
    "solution": KIT_ROOT / "solution",
    "allreduce_averages_twice": BUGS / "allreduce_averages_twice.toml",  # Part 3 bug
    "net_lr_applied_twice": BUGS / "net_lr_applied_twice.toml",  # Part 2 bug
    "no_communication": CHEAT,  # Part 3 functions that never combine the ranks' gradients
    "combined_host_sgd": CHEAT.parent / "combined_host_sgd",  # an SGD step on the host
    # the same beside an empty kernel launched per call: the replay catches it
    "combined_empty_kernel": CHEAT.parent / "combined_empty_kernel",
    "combined_broadcast": CHEAT.parent / "combined_broadcast",  # every rank gets every row
}
SLOW = {"allreduce_averages_twice", "no_communication", "combined_host_sgd",
        "combined_empty_kernel"}


def _names(names: list[str]) -> list:
    return [pytest.param(n, marks=pytest.mark.slow if n in SLOW else ()) for n in names]


def _folder(name: str, tmp: Path) -> Path:
    source = SUBMISSIONS[name]
    if source.suffix == ".toml":
        return materialize(load_spec(source), tmp / "bugs")
    folder = shutil.copytree(KIT_ROOT / "solution", tmp / name)
    for module in source.glob("*.py"):  # the cheat's modules over the solution's
        shutil.copy(module, folder / module.name)
    return folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    """mpi.combined for every submission the selected tests look at, two at a time."""
    if find_mpiexec() is None:
        pytest.skip("no mpiexec")
    from grader.parts.mpi_combined import grade_combined

    tmp = tmp_path_factory.mktemp("combined")
    config = replace(load_config(), secret=SECRET)
    names = sorted(selected_values(request, "name"))

    def grade(name: str):
        return grade_combined(_folder(name, tmp), tmp / "work" / name, config, False)[0]

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(names, pool.map(grade, names), strict=True))


@pytest.mark.parametrize("name", _names(["solution"]))
def test_the_solution_gets_the_item(graded, name):
    item = graded[name]
    assert item.points == item.max_points > 0, item.message
    split, reference = item.checks
    assert split["passed"] and reference["passed"]
    # Well inside the derived bound: only the order of float32 sums differs.
    assert 0 <= split["relative_max_norm"] < split["tolerance"] / 10
    assert item.figures["complete"] and not item.figures["timed_out"]


@pytest.mark.parametrize("name", _names(["combined_broadcast"]))
def test_ranks_that_each_train_on_every_row_lose_the_item(graded, name):
    """A scatter that copies the batch to every rank and an all-reduce that adds nothing
    make each rank train as one process: the rows each rank trained on give it away."""
    item = graded[name]
    assert item.points == 0 and "rows between them" in item.message, item.message
    assert "a Part 3 problem" in item.message


@pytest.mark.parametrize("name", _names(["allreduce_averages_twice", "no_communication"]))
def test_a_part3_bug_loses_the_item_and_is_blamed(graded, name):
    item = graded[name]
    assert item.points == 0 and "a Part 3 problem" in item.message, item.message
    split, _ = item.checks
    assert not split["passed"] and split["relative_max_norm"] > 1e-2


@pytest.mark.parametrize("name", _names(["net_lr_applied_twice"]))
def test_a_part2_bug_loses_the_item_and_is_blamed(graded, name):
    """The documented design: two ranks agree with the buggy network in one process
    (check 1 passes), the CPU reference does not (check 2 fails)."""
    item = graded[name]
    split, reference = item.checks
    assert split["passed"] and not reference["passed"], item.message
    assert item.points == 0 and "a Part 2 problem" in item.message


def _params(seed: int) -> network.Params:
    return network.glorot_uniform([6, 4, 3], seed)


def test_the_checks_on_made_up_results():
    ref = _params(0)
    named = ref.named()
    nudged = {k: (v * np.float32(1 + 1e-7)).astype(np.float32) for k, v in named.items()}
    tol = split_tolerance([19, 19, 1], 49)
    ok, message, rows = check_combined(named, [nudged, nudged], ref, tol)
    assert ok and all(r["passed"] for r in rows), message
    # One rank off (its model drifted): check 1 fails and blames Part 3.
    drifted = {**nudged, "W1": nudged["W1"] + np.float32(1e-3)}
    ok, message, _ = check_combined(named, [nudged, drifted], ref, tol)
    assert not ok and "Part 3" in message and "rank 1's W1" in message
    # A network that never trains: both runs equal, but far from the reference.
    still = _params(1).named()
    ok, message, rows = check_combined(still, [still, still], ref, tol)
    assert not ok and rows[0]["passed"] and not rows[1]["passed"] and "Part 2" in message
    # Off on 2 ranks, and the network alone already off: Part 2 named first.
    ok, message, _ = check_combined(still, [still, drifted], ref, tol)
    assert not ok and "already differs from the CPU reference" in message
    # Missing or non-finite arrays are reported, never compared.
    ok, message, _ = check_combined(named, [nudged, {**nudged, "b2": nudged["b2"] * np.nan}],
                                    ref, tol)
    assert not ok and "NaN" in message


def test_the_split_tolerance_follows_the_derivation():
    """sum over steps of gamma(2 n + 2 fan_in + 3): the reduced configuration's 3 steps
    (19, 19 and 1 rows, fan-in 49) stay far below Part 2's criterion, so the check is
    tighter than agreement with the reference for a Part 3 error."""
    plan = cases.plan(False, None)
    assert cases.steps(plan) == [19, 19, 1]
    tol = split_tolerance(cases.steps(plan), 49)
    assert tol == pytest.approx(2 * gamma(139) + gamma(103))
    assert 1e-5 < tol < AGREEMENT_TOL / 3
    gpu = cases.plan(True, "/mnist")
    assert cases.steps(gpu) == [800] * 5 + [1] + [800] * 5 + [1]


def test_only_rank_0_holds_the_rows_drawn_from_the_secret():
    plan = cases.plan(False, None)
    one, two = (cases.training_data(plan, s) for s in (3, 4))
    assert len(one) == plan["data"]["rows"] and one.images.dtype == np.float32
    assert not np.array_equal(one.images, two.images)
    inputs = cases.rank_inputs(one)
    assert set(inputs[0]) == {"train/images", "train/labels"} and inputs[1] == {}


@pytest.mark.gpu
def test_on_a_gpu_the_item_is_graded_on_the_gpu(tmp_path):
    """The GPU configuration (MNIST when it is there, else the reduced one on the GPU):
    the solution passes, a Part 3 and a Part 2 bug fail, each blamed on its part."""
    from grader.parts.mpi_combined import grade_combined

    if find_mpiexec() is None:
        pytest.skip("no mpiexec")
    config = replace(load_config(), secret=SECRET)
    expected = {"solution": None, "allreduce_averages_twice": "a Part 3 problem",
                "net_lr_applied_twice": "a Part 2 problem"}
    for name, blame in expected.items():
        item = grade_combined(_folder(name, tmp_path), tmp_path / "work" / name, config,
                              True)[0]
        print(f"{name}: {item.points}/{item.max_points} in {item.figures['job_seconds']} s: "
              f"{item.message}")
        if blame is None:
            assert item.points == item.max_points, item.message
            assert item.checks[0]["relative_max_norm"] < item.checks[0]["tolerance"]
        else:
            assert item.points == 0 and blame in item.message, item.message


@pytest.mark.parametrize("name", _names(["combined_host_sgd"]))
def test_a_network_computed_on_the_host_loses_the_item(graded, name):
    item = graded[name]
    assert item.points == 0, item.message
    assert "call(s) of sgd_step() launched none of your kernels" in item.message


@pytest.mark.parametrize("name", _names(["combined_empty_kernel"]))
def test_a_host_network_beside_an_empty_kernel_loses_the_item(graded, name):
    """Counting launches per call sees an own kernel in every call; the replay of the
    calls drawn from the secret finds the parameters it leaves unchanged."""
    item = graded[name]
    assert item.points == 0, item.message
    assert "not what the kernels the call launched compute" in item.message


def test_unreplayed_calls_are_reported():
    from grader.checks.mpi_combined import REPLAY_TOL, unreplayed_calls

    honest = {"audit_missing": np.zeros(3, np.int64), "audit_worst": np.zeros(3)}
    assert unreplayed_calls([[honest], [honest, honest]]) == ""
    off = {**honest, "audit_worst": np.array([0.0, 10 * REPLAY_TOL, 0.0])}
    message = unreplayed_calls([[honest], [honest, off]])
    assert "rank 1 on 2 ranks: recorded call 2" in message and "not what the kernels" in message
    lost = {**honest, "audit_missing": np.array([0, 0, 2])}
    assert "2 output(s) not in memory" in unreplayed_calls([[lost], [honest, honest]])
    nan = {**honest, "audit_worst": np.array([np.nan, 0.0, 0.0])}
    assert "recorded call 1" in unreplayed_calls([[nan], [honest, honest]])
    for empty in ({}, {"audit_missing": np.zeros(0, np.int64), "audit_worst": np.zeros(0)}):
        assert "no call of the network was recorded" in unreplayed_calls([[empty], [honest]])


def test_the_cases_audit_the_first_last_and_a_drawn_call():
    plan = cases.plan(False, None)
    drawn = cases.cases(plan, SECRET)
    total = len(cases.steps(plan))
    for case in drawn:
        assert {0, total - 1} <= set(case["audit_calls"]) <= set(range(total))
    assert cases.cases(plan, SECRET) == drawn  # from the secret, reproducibly


def test_corrupt_training_data_leaves_the_item_not_graded(tmp_path, monkeypatch):
    """A truncated MNIST file is the machine's problem, not the submission's: the item is
    reported not graded, with the reason, and nothing is raised (the class goes on)."""
    from grader.parts import mpi_combined as part
    from grader.results import NOT_GRADED
    from nnkit.mnist import FILES

    sample = KIT_ROOT / "nnkit" / "data" / "sample"
    for name in FILES.values():
        shutil.copy(sample / name, tmp_path / name)
    data = (tmp_path / FILES["train-images"]).read_bytes()
    (tmp_path / FILES["train-images"]).write_bytes(data[: len(data) // 2])
    monkeypatch.setattr(part, "mnist_folder", lambda: str(tmp_path))
    monkeypatch.setattr(part, "run_mpi_job", lambda *a, **k: pytest.fail("ran the job"))
    config = replace(load_config(), secret=SECRET, mpiexec="mpiexec")
    [item] = part.grade_combined(KIT_ROOT / "solution", tmp_path / "work", config, True)
    assert (item.points, item.status) == (None, NOT_GRADED)
    assert "could not be read" in item.message and "train-images" in item.message


def test_a_network_call_that_launches_no_kernel_is_reported():
    """Part 2's rule holds here too: every call of forward, backward and sgd_step must
    launch the submission's own kernels (the worker counts them per rank and case)."""
    from grader.checks.mpi_combined import NETWORK_CALLS, silent_calls

    honest = {"calls": np.array([4, 4, 4]), "silent": np.zeros(3, np.int64)}
    assert len(NETWORK_CALLS) == 3
    assert silent_calls([[honest], [honest, honest]]) == ""
    host_step = {**honest, "silent": np.array([0, 0, 3])}
    message = silent_calls([[honest], [honest, host_step]])
    assert "rank 1 on 2 ranks: 3 of 4 call(s) of sgd_step()" in message
    assert "no count" in silent_calls([[{}], [honest, honest]])
