"""bench-train's parts that need no GPU: its GEMM names, the weights' distance from the
cuBLAS run, and the table."""

import numpy as np
import pytest

from nnkit import bench_train, network
from nnkit.backend import select
from nnkit.training import GEMM_CHOICES


def test_default_gemms_are_every_version_and_their_thin_variants():
    names = bench_train.DEFAULT_GEMMS.split(",")
    assert set(names) <= set(GEMM_CHOICES) and "host" not in names
    for version in ("naive", "register", "hierarchical", "cuda-c", "cublas",
                    "register+thin", "hierarchical+thin", "cuda-c+thin"):
        assert version in names


@pytest.mark.parametrize("bad", ["host", "cublas+thin", "cuda", "hierarchical+thin+thin"])
def test_unknown_gemm_names_are_refused_before_anything_runs(bad, capsys):
    with pytest.raises(SystemExit):
        bench_train.main(["--gemms", f"register,{bad}"])
    assert "unknown" in capsys.readouterr().err


def test_without_a_gpu_it_says_so():
    if select().on_gpu:
        pytest.skip("a GPU is here")
    assert bench_train.main(["--gemms", "register+thin"]) == 2


def test_deviation_is_relative_to_the_largest_reference_weight():
    ref = network.Params([np.array([[2.0, -4.0]], np.float32), np.array([[1.0]], np.float32)],
                         [np.zeros(1, np.float32), np.zeros(1, np.float32)])
    moved = network.Params([np.array([[2.0, -4.0]], np.float32),
                            np.array([[1.5]], np.float32)], ref.biases)
    assert bench_train.deviation(ref, ref) == 0.0
    assert bench_train.deviation(moved, ref) == pytest.approx(0.5 / 4.0)


def test_table_marks_failures_and_missing_ratios():
    rows = [{"batch": 800, "implementation": "pytorch", "seconds_per_epoch": 0.05,
             "over_pytorch": 1.0, "from_cublas": None},
            {"batch": 800, "implementation": "solution+cuda-c+thin", "seconds_per_epoch": 0.04,
             "over_pytorch": 0.8, "from_cublas": 3e-7},
            {"batch": 800, "implementation": "solution+naive", "seconds_per_epoch": None,
             "over_pytorch": None, "from_cublas": None}]
    table = bench_train.format_table(rows, "title").splitlines()
    assert table[0] == "title" and "x PyTorch" in table[1]
    assert table[3].split() == ["800", "solution+cuda-c+thin", "0.0400", "0.80", "3.0e-07"]
    assert table[4].split() == ["800", "solution+naive", "failed", "-", "-"]
