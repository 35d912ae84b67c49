"""The thin-product kernels (nnkit/gemm_thin.py) and the rule that picks them
(nnkit/thin_dispatch.py): awkward shapes and layouts under the simulator's race and index
checker, each result held to the kit's float32 bound (nnkit.gemm_reference)."""

import numpy as np
import pytest

from nnkit import gemm_thin
from nnkit.backend import select, to_device, to_host
from nnkit.gemm_reference import error_bound, random_operands, reference
from nnkit.thin_dispatch import COLUMNS, OUTER, ROWS, THIN, TILED, ThinKernels, plan, with_thin
from tests.gemm_checking import check_clean

_check_clean = check_clean  # tests/gemm_checking.py


# --- the rule ---------------------------------------------------------------------------


def _operands(M, N, K, trans_a=False, trans_b=False):
    A, B, C = random_operands(M, N, K, seed=0, trans_a=trans_a, trans_b=trans_b)
    return (A.T if trans_a else A), (B.T if trans_b else B), C


@pytest.mark.parametrize("shape, trans_a, trans_b, expected", [
    ((800, 10, 1024), False, True, (ROWS, False)),     # forward: Z = A W^T
    ((10, 1024, 800), True, False, (COLUMNS, False)),  # dW = dZ^T A
    ((800, 1024, 10), False, False, (OUTER, False)),   # dA = dZ W
    ((800, 1024, 784), False, True, (TILED, False)),   # the hidden layer: tiles
    ((800, 10, 1024), True, False, (COLUMNS, True)),   # thin N, A contiguous along M
    ((10, 1024, 800), False, True, (ROWS, True)),      # thin M, B contiguous along K
    ((THIN + 1, THIN + 1, THIN + 1), False, False, (TILED, False)),
    ((THIN, 1000, THIN), False, False, (COLUMNS, False)),
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) and len(v) == 3 else None)
def test_plan_picks_the_kernel_whose_reads_are_contiguous(shape, trans_a, trans_b, expected):
    assert plan(*_operands(*shape, trans_a, trans_b)) == expected


def test_dispatch_hands_the_transposed_problem_over():
    calls = []

    def recorder(name):
        def launch(A, B, C, alpha, beta):
            calls.append((name, A.shape, B.shape, C.shape, C.strides))
        return launch

    thin = ThinKernels(recorder(ROWS), recorder(COLUMNS), recorder(OUTER))
    launch = with_thin(recorder(TILED), thin)
    A, B, C = _operands(40, 5, 30, trans_a=True)
    launch(A, B, C, 1.0, 0.0)
    assert calls == [(COLUMNS, (5, 30), (30, 40), (5, 40), C.T.strides)]
    launch(*_operands(40, 50, 30), 1.0, 0.0)
    assert calls[-1][0] == TILED


# --- the kernels in the simulator (or on a GPU) -------------------------------------------

AWKWARD = [  # M, N, K, trans_a, trans_b, beta
    (1, 1, 1, False, False, 5.0),
    (67, 10, 17, False, True, 0.0),   # the forward's layout
    (17, 1, 67, True, False, -2.0),
    (67, 16, 10, True, True, 5.0),
]


@pytest.mark.parametrize("case", AWKWARD, ids=lambda c: "x".join(map(str, c[:3])))
def test_rows_kernel(case):
    _check_clean(gemm_thin.rows_gemm, *case[:5], beta=case[5])


@pytest.mark.parametrize("case", [(N, M, K, ta, tb, beta) for M, N, K, ta, tb, beta in AWKWARD],
                         ids=lambda c: "x".join(map(str, c[:3])))
def test_columns_kernel(case):
    _check_clean(gemm_thin.columns_gemm, *case[:5], beta=case[5])


def test_columns_kernel_splits_k_and_adds_the_shares_up():
    # 600 = three shares of 200 along K: partial sums in the workspace, then one more launch.
    assert gemm_thin.splits(600) == 3
    _check_clean(gemm_thin.columns_gemm, 10, 17, 600, True, False, beta=5.0)


@pytest.mark.parametrize("case", [
    (1, 1, 1, False, False, 5.0),
    (67, 130, 10, False, False, 0.0),  # the backward's dA: two blocks across N, five down M
    (17, 67, THIN, True, True, -2.0),
    (10, 1, 3, False, True, 5.0),
], ids=lambda c: "x".join(map(str, c[:3])))
def test_outer_kernel(case):
    _check_clean(gemm_thin.outer_gemm, *case[:5], beta=case[5])


def test_kernels_refuse_what_they_cannot_compute():
    A, B, C = (to_device(X) for X in random_operands(THIN + 1, THIN + 1, THIN + 1, seed=1))
    for launch in (gemm_thin.rows_gemm, gemm_thin.columns_gemm, gemm_thin.outer_gemm):
        with pytest.raises(ValueError, match=f"at most {THIN}"):
            launch(A, B, C, 1.0, 0.0)
    tall = 65535 * gemm_thin.OUTER_ROWS + 1  # one block row past CUDA's grid limit
    A, B, C = (to_device(np.zeros(shape, np.float32)) for shape in ((tall, 1), (1, 1),
                                                                     (tall, 1)))
    with pytest.raises(ValueError, match="65535 blocks"):
        gemm_thin.outer_gemm(A, B, C, 1.0, 0.0)


def _no_tiles(A, B, C, alpha, beta):
    raise AssertionError(f"a thin product reached the tiled kernel: C is {C.shape}")


NUMBA_THIN = ThinKernels(gemm_thin.rows_gemm, gemm_thin.columns_gemm, gemm_thin.outer_gemm)


@pytest.mark.parametrize("case", [
    (67, 10, 17, False, True, 0.0),   # forward of the output layer
    (10, 17, 67, True, False, 5.0),   # its dW (beta = lambda)
    (67, 17, 10, False, False, 0.0),  # its dA
    (67, 10, 17, True, False, 5.0),   # thin N with A contiguous along M: columns on C^T
    (10, 17, 67, False, True, -2.0),  # thin M with B contiguous along K: rows on C^T
], ids=lambda c: "x".join(map(str, c[:3])) + "tn"[c[3]] + "tn"[c[4]])
def test_dispatch_computes_every_thin_product(case):
    _check_clean(with_thin(_no_tiles, NUMBA_THIN), *case[:5], beta=case[5])


def test_gemm_names_pick_the_thin_dispatch():
    from nnkit.submission import NAMED
    from nnkit.training import GEMM_CHOICES, make_launcher

    assert {"hierarchical+thin", "register+thin", "cuda-c", "cuda-c+thin"} <= set(GEMM_CHOICES)
    assert make_launcher("hierarchical+thin", NAMED["solution"]).__name__ == (
        "gemm_hierarchical_with_thin")
    assert make_launcher("hierarchical", NAMED["solution"]).__name__ == "gemm_hierarchical"
    with pytest.raises(ValueError, match="unknown GEMM"):
        make_launcher("cublas+thin", NAMED["solution"])


@pytest.mark.slow
def test_solution_network_trains_on_version_4_with_thin_products(tmp_path):
    """Hidden 20: the hidden layer's products go to version 4's tiles, the output layer's
    to the thin kernels; one epoch ends where the CPU reference does (relative max-norm
    <= 1e-4, the grader's agreement bound, net.agreement)."""
    from tests.conftest import run_kit

    small = ["--data", "sample", "--limit", "60", "--pool", "4", "--hidden", "20",
             "--batch", "25", "--epochs", "1"]
    saved = {}
    for name, impl in (("reference", []), ("thin", ["--impl", "solution", "--gemm",
                                                    "hierarchical+thin"])):
        saved[name] = tmp_path / f"{name}.npz"
        result = run_kit("nnkit", "train", *impl, *small, "--save", str(saved[name]))
        assert result.returncode == 0, result.stderr[-2000:]
    with np.load(saved["reference"]) as ref, np.load(saved["thin"]) as got:
        for key in ("W1", "b1", "W2", "b2"):
            expected = ref[key].astype(np.float64)
            error = np.abs(got[key] - expected).max() / np.abs(expected).max()
            assert error <= 1e-4, (key, error)


@pytest.mark.slow
def test_numba_kernels_keep_their_arrays_in_registers():
    """Where the CUDA toolkit is installed: ptxas reports no stack frame for any thin kernel
    (the THIN-sized per-thread arrays, indexed only by unrolled loops, are registers)."""
    import os
    import re
    import shutil
    from pathlib import Path

    from tests.conftest import run_kit

    home = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    if not (home / "bin" / "ptxas").is_file() and not shutil.which("ptxas"):
        pytest.skip("no CUDA toolkit (ptxas) here")
    result = run_kit("nnkit.ptxas_report", "--thin",
                     env={"NUMBA_ENABLE_CUDASIM": "0", "CUDA_HOME": str(home)})
    if "NVVM" in result.stderr:
        pytest.skip("the CUDA toolkit here has no libNVVM")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["rows_kernel", "columns_kernel",
                                                   "finish_kernel", "outer_kernel"]
    for line in lines:
        assert re.search(r"\b0 bytes stack frame, 0 bytes spill stores", line), line


def test_bench_gemm_checks_and_times_thin_variants(tmp_path):
    import json

    from nnkit.bench_gemm import main

    out = tmp_path / "b.json"
    assert main(["--shapes", "12x10x20", "--kernels", "register+thin,cuda-c+thin",
                 "--repeats", "1", "--json", str(out)]) == 0
    rows = {r["kernel"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["register+thin"]["status"] == "ok"
    assert ("cuda-c+thin" in rows) == select().on_gpu
    with pytest.raises(SystemExit):
        main(["--kernels", "cublas+thin"])


@pytest.mark.parametrize("launch", [gemm_thin.rows_gemm, gemm_thin.columns_gemm,
                                    gemm_thin.outer_gemm], ids=lambda f: f.__name__)
def test_strided_views_leave_the_border_alone(launch):
    """A, B, C inside larger arrays (NaN around A and B, a sentinel around C): read and
    written through their strides, nothing outside C touched."""
    M, N, K = 10, 9, 13
    A, B, C = random_operands(M, N, K, seed=9)
    bufs = [np.full((r + 2, c + 3), fill, np.float32)
            for (r, c), fill in zip((A.shape, B.shape, C.shape), (np.nan, np.nan, 7.0),
                                    strict=True)]
    for buf, X in zip(bufs, (A, B, C), strict=True):
        buf[1:-1, 1:-2] = X
    devices = [to_device(b) for b in bufs]
    views = [d[1:-1, 1:-2] for d in devices]
    if select().on_gpu:
        launch(*views, 2.0, 5.0)
    else:
        from grader.worker import simcheck

        with simcheck.instrument() as findings:
            launch(*views, 2.0, 5.0)
        assert list(findings) == [], [f.describe() for f in findings]
    after = to_host(devices[2])
    expected, bound = reference(A, B, C, 2.0, 5.0), error_bound(A, B, C, 2.0, 5.0)
    assert np.all(np.abs(after[1:-1, 1:-2] - expected) <= bound)
    border = after.copy()
    border[1:-1, 1:-2] = 7.0
    assert np.all(border == 7.0)
