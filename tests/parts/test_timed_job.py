"""Part 1's timed task on a GPU run (grader.parts.gemm.grade_speed), exercised in the
simulator with one small timed shape: one worker times every kernel that passed, each
kernel's files apart, a library product during the timed calls costs the kernel its
correctness item, and a kernel that failed is not timed."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from grader.cases.gemm import GemmCase
from grader.parts import gemm as gemm_part
from grader.parts import gemm_speed
from grader.results import FAIL, PASS
from grader.scoring import load_config
from nnkit.submission import NAMED

pytestmark = pytest.mark.gemm

SMALL = [GemmCase(17, 9, 5, 2.0, 5.0, seed=900)]
KERNELS = ["naive", "shared"]


@pytest.fixture
def speed(monkeypatch, tmp_path):
    monkeypatch.setattr(gemm_speed, "perf_cases", lambda: SMALL)
    config = replace(load_config(), repeats=2, warmup=0, secret=7)
    # Any positive reference: the items' figures are ratios to it.
    reference = gemm_part.Reference({k: [1.0] for k in [*KERNELS, "cublas"]})

    def run(submission, passed):
        verdicts = gemm_speed.Verdicts(KERNELS)
        for kernel in KERNELS:
            verdicts.record(kernel, kernel in passed)
        items = gemm_speed.grade_speed(KERNELS, submission, tmp_path / "work", config,
                                      {"0": reference}, verdicts, None, on_gpu=False)
        return {i.id: i for i in items}, tmp_path / "work"

    return run


def test_one_worker_times_the_kernels_that_passed_and_only_those(speed):
    items, work = speed(NAMED["solution"], {"naive"})
    naive, shared = items["gemm.naive.performance"], items["gemm.shared.performance"]
    # Timed (the simulator has no device clock, so the check itself says so) ...
    assert "no GPU timings" in naive.message
    assert shared.status == FAIL and "not timed" in shared.message  # ... and not timed
    assert "gemm.naive.correctness" not in items  # nothing to take back
    names = {p.name for d in work.glob("timed-results-*/out") for p in d.iterdir()}
    assert "naive-perf-0.json" in names and not any(n.startswith("shared-") for n in names)


def test_a_library_product_only_in_the_timed_calls_costs_correctness_too(speed, tmp_path):
    cheat = tmp_path / "cheat"
    shutil.copytree(NAMED["solution"], cheat)
    source = cheat / "gemm_1_naive.py"
    text = source.read_text()
    # The correctness cases are small; the timed shape has 17 rows: only then cuBLAS.
    text = text.replace("def gemm_naive(A, B, C, alpha: float, beta: float) -> None:\n",
                        "def gemm_naive(A, B, C, alpha: float, beta: float) -> None:\n"
                        "    if A.shape[0] == 17:\n"
                        "        import numpy\n"
                        "        numpy.matmul(numpy.ones((2, 2)), numpy.ones((2, 2)))\n", 1)
    source.write_text(text)
    items, _ = speed(cheat, {"naive", "shared"})
    correctness = items["gemm.naive.correctness"]
    assert correctness.status == FAIL and "in the timed calls" in correctness.message
    assert "not timed" in items["gemm.naive.performance"].message
    assert "no GPU timings" in items["gemm.shared.performance"].message  # timed, kept
    assert "gemm.shared.correctness" not in items


def test_every_kernel_keeps_its_place_in_the_report():
    from grader.pipeline import Task, in_order
    from grader.results import ItemResult

    def item(i):
        return ItemResult(i, i, 1.0, 1.0, PASS, "")

    plan = [Task("gemm naive", ["gemm.naive.correctness"], list),
            Task("gemm shared", ["gemm.shared.correctness"], list),
            Task("gemm speed", ["gemm.naive.performance", "gemm.shared.performance"], list),
            Task("net functions", ["net.kernels"], list)]
    got = {"gemm naive": [item("gemm.naive.correctness")],
           "gemm shared": [item("gemm.shared.correctness")],
           "gemm speed": [replace(item("gemm.naive.correctness"), points=0.0),
                          item("gemm.naive.performance"), item("gemm.shared.performance")],
           "net functions": [item("net.kernels")]}
    ordered = in_order(plan, got)
    assert [i.id for i in ordered] == ["gemm.naive.correctness", "gemm.naive.performance",
                                       "gemm.shared.correctness", "gemm.shared.performance",
                                       "net.kernels"]
    assert ordered[0].points == 0.0  # the timed task's verdict replaced the first


def test_verdicts_of_a_task_that_crashed_count_as_failed(monkeypatch):
    verdicts = gemm_speed.Verdicts(["naive"])

    def boom(*args):
        raise RuntimeError("grader bug")

    monkeypatch.setattr(gemm_part, "_grade_kernel", boom)
    with pytest.raises(RuntimeError):
        gemm_part.grade_kernel("naive", None, None, None, True, None, verdicts)
    assert verdicts.wait() == {"naive": (False, [])}
