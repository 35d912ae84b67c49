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


def test_products_are_the_networks_with_its_layouts():
    from nnkit.bench_products import format_products, measure, products
    from nnkit.submission import NAMED

    shapes = {name: (a, ta, b, tb) for name, a, ta, b, tb in products(3200, 1024)}
    assert shapes["Z1 = X W1^T"] == ((3200, 784), False, (1024, 784), True)
    assert shapes["Z2 = A1 W2^T"] == ((3200, 1024), False, (10, 1024), True)
    assert shapes["dW2 = dZ2^T A1"] == ((3200, 10), True, (3200, 1024), False)
    assert shapes["dA1 = dZ2 W2"] == ((3200, 10), False, (10, 1024), False)
    assert shapes["dW1 = dZ1^T X"] == ((3200, 1024), True, (3200, 784), False)
    rows = measure(NAMED["solution"], ["host", "cuda-c"], batch=20, hidden=12, repeats=1,
                   features=20)
    assert [r["shape"] for r in rows if r["gemm"] == "host"] == [
        "20x12x20", "20x10x12", "10x12x20", "20x12x10", "12x20x20"]
    assert all(r["status"] == "ok" and r["seconds"] > 0 for r in rows if r["gemm"] == "host")
    if not select().on_gpu:
        assert all("needs a GPU" in r["status"] for r in rows if r["gemm"] == "cuda-c")
    table = format_products(rows)
    assert "ms, all five" in table and table.count("failed") == (0 if select().on_gpu else 1)


@pytest.mark.slow
def test_products_check_out_on_a_kit_version_with_thin_kernels():
    from nnkit.bench_products import measure
    from nnkit.submission import NAMED

    # Hidden 12 and 20 features: every product is thin and small.
    rows = measure(NAMED["solution"], ["register+thin"], batch=20, hidden=12, repeats=1,
                   features=20)
    assert len(rows) == 5 and all(r["status"] == "ok" for r in rows), rows


def test_a_failing_gemm_leaves_a_row_and_the_run_goes_on(monkeypatch, tmp_path, capsys):
    """The whole command with a stand-in for the GPU check: cuBLAS and CUDA C cannot run
    here, so their rows say so, in the table and in the JSON."""
    import json
    import types

    if select().on_gpu:
        pytest.skip("on a GPU these GEMMs run")

    def no_torch(*args, **kwargs):
        raise ImportError

    monkeypatch.setattr(bench_train, "select",
                        lambda: types.SimpleNamespace(on_gpu=True, describe=lambda: "stand-in"))
    monkeypatch.setattr(bench_train, "time_torch", no_torch)
    out = tmp_path / "b.json"
    assert bench_train.main(["--gemms", "cublas,cuda-c", "--batches", "250", "--hidden", "8",
                             "--epochs", "2", "--data", "sample", "--products",
                             "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "solution+cuda-c                 failed" in printed
    report = json.loads(out.read_text())
    assert [r["seconds_per_epoch"] for r in report["epochs"]] == [None, None]
    assert len(report["products"]) == 10
    assert all("needs a GPU" in r["status"] for r in report["products"])
