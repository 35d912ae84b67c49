"""Version 5's thin-product kernels (nnkit/cuda_src/sgemm_thin.cu, nnkit/gemm_cuda_thin.py).

Without a GPU: the source compiles with nvcc for sm_90 without spills (where the CUDA
toolkit is installed) and its logic, shuffles included, runs on the CPU through a C++
emulation (tests/cuda_emulation/emulate_thin.cpp, where g++ is). On a GPU: through CuPy,
alone and behind the dispatch rule. Results are held to the kit's float32 bound.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nnkit import gemm_cuda_thin
from nnkit.backend import select
from nnkit.gemm_cuda import element_strides
from nnkit.gemm_cuda_thin import KERNELS, SOURCE, splits
from nnkit.gemm_reference import error_bound, random_operands, reference
from tests.conftest import TESTS
from tests.gemm_checking import check_clean
from tests.kit.test_gemm_cuda import _embed, _nvcc

EMULATOR = TESTS / "cuda_emulation" / "emulate_thin.cpp"


def test_source_compiles_for_sm90_without_spills(tmp_path):
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("no CUDA toolkit (nvcc) here")
    result = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", "-c", str(SOURCE), "-o",
                             str(tmp_path / "thin.o"), "--ptxas-options=-v"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = result.stderr
    compiled = re.findall(r"Compiling entry function '(\w+)'", report)
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill "
                        r"loads", report)
    assert sorted(compiled) == sorted(KERNELS), report
    # A stack frame would mean the THIN-sized arrays went to local memory, not registers.
    assert frames and all(f == ("0", "0", "0") for f in frames), report


def test_launcher_constants_match_the_source():
    constants = dict(re.findall(r"constexpr int (\w+) = (\d+);", SOURCE.read_text()))
    for name in ("THIN", "ROW_WARPS", "COL_X", "COL_Y", "OUTER_X", "OUTER_ROWS",
                 "FINISH_THREADS"):
        assert int(constants[name]) == getattr(gemm_cuda_thin, name), name


# --- the kernels' logic on the CPU ------------------------------------------------------


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ to build the CPU emulation")
    exe = tmp_path_factory.mktemp("emulate") / "emulate_thin"
    subprocess.run([gxx, "-std=c++20", "-O1", "-pthread", "-I", str(SOURCE.parent),
                    str(EMULATOR), "-o", str(exe)], check=True)
    return exe


def _emulate(exe: Path, tmp: Path, which: str, A, B, C, alpha, beta, layouts) -> tuple:
    """(C's view after the call, C's buffer outside the view after, and before)."""
    bufs, views = zip(*(_embed(X, lay, fill) for X, lay, fill in
                        zip((A, B, C), layouts, (np.nan, np.nan, 7.0), strict=True)),
                      strict=True)
    offsets = [(v.__array_interface__["data"][0] - b.__array_interface__["data"][0]) // 4
               for b, v in zip(bufs, views, strict=True)]
    strides = [element_strides(v.shape, v.strides, n) for v, n in zip(views, "ABC", strict=True)]
    (tmp / "in.bin").write_bytes(b"".join(b.tobytes() for b in bufs))
    M, K = A.shape
    N = B.shape[1]
    chunk = max(1, -(-K // splits(K)))  # as gemm_cuda_thin.columns_gemm chooses it
    args = [which, M, N, K, repr(float(alpha)), repr(float(beta)),
            *(s for pair in strides for s in pair), *offsets, *(b.size for b in bufs), chunk,
            tmp / "in.bin", tmp / "out.bin"]
    subprocess.run([str(exe), *map(str, args)], check=True, timeout=120)
    out = np.fromfile(tmp / "out.bin", np.float32)
    inside = np.zeros(out.size, bool)
    positions = np.arange(out.size)
    step = positions.itemsize
    inside[np.lib.stride_tricks.as_strided(positions[offsets[2]:], views[2].shape,
                                           tuple(s * step for s in strides[2]))] = True
    after = np.lib.stride_tricks.as_strided(out[offsets[2]:], views[2].shape, views[2].strides)
    return after.copy(), out[~inside], bufs[2][~inside]


EMULATED = [  # kernel, M, N, K, alpha, beta, layouts of A, B, C
    ("rows", 1, 1, 1, 2.0, 5.0, ("row", "row", "row")),
    ("rows", 67, 10, 1024, 1.0, 0.0, ("row", "t", "row")),  # the network's forward
    ("rows", 17, 16, 67, -1.5, 5.0, ("t", "guarded", "guarded")),
    ("columns", 10, 67, 800, 1.0, 1e-4, ("t", "row", "row")),  # dW: four shares of K
    ("columns", 1, 17, 1, 2.0, 0.0, ("row", "row", "row")),
    ("columns", 16, 67, 17, 2.0, 5.0, ("guarded", "t", "t")),
    ("outer", 67, 130, 10, 1.0, 0.0, ("row", "row", "row")),  # the network's dA
    ("outer", 17, 1, 16, -1.5, 5.0, ("t", "t", "guarded")),
]


@pytest.mark.parametrize("case", EMULATED,
                         ids=lambda c: c[0] + "-" + "x".join(map(str, c[1:4])))
def test_kernel_logic_on_the_cpu(emulator, tmp_path, case):
    which, M, N, K, alpha, beta, layouts = case
    A, B, C = random_operands(M, N, K, seed=M + 7 * N + 11 * K)
    if beta == 0.0:
        C[:] = np.nan  # output only: no NaN may survive
    got, border_after, border_before = _emulate(emulator, tmp_path, which, A, B, C, alpha,
                                                beta, layouts)
    expected, bound = reference(A, B, C, alpha, beta), error_bound(A, B, C, alpha, beta)
    assert np.all(np.abs(got - expected) <= bound), np.nanmax(np.abs(got - expected) / bound)
    assert np.array_equal(border_after, border_before, equal_nan=True), "wrote outside C"


def test_column_shares_cover_k():
    assert splits(1) == 1 and splits(256) == 1 and splits(257) == 2
    assert splits(3200) == 13 and splits(10**6) == 64


# --- on a GPU, through CuPy --------------------------------------------------------------

GPU_CASES = [  # kernel, M, N, K, alpha, beta, trans_a, trans_b
    ("rows", 1, 1, 1, 2.0, 5.0, False, False),
    ("rows", 3200, 10, 1024, 1.0, 0.0, False, True),
    ("rows", 67, 16, 17, -1.5, 5.0, True, False),
    ("columns", 10, 1024, 3200, 1.0, 1e-4, True, False),
    ("columns", 16, 67, 17, 2.0, 0.0, False, True),
    ("columns", 1, 1, 1, 2.0, 5.0, False, False),
    ("outer", 3200, 1024, 10, 1.0, 0.0, False, False),
    ("outer", 67, 17, 16, 2.0, -2.0, True, True),
]


def _gpu_check(launch, M, N, K, alpha, beta, trans_a, trans_b):
    check_clean(launch, M, N, K, trans_a, trans_b, alpha=alpha, beta=beta, seed=M * N + K)


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c[0] + "-" + "x".join(map(str, c[1:4]))
                         + "tn"[c[6]] + "tn"[c[7]])
def test_gpu_kernels(case):
    from nnkit import gemm_cuda_thin

    assert select().on_gpu
    which, *rest = case
    _gpu_check(getattr(gemm_cuda_thin, f"{which}_gemm"), *rest)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [
    (3200, 10, 1024, 1.0, 0.0, False, True),     # the network's three thin products
    (10, 1024, 3200, 1.0, 1e-4, True, False),
    (3200, 1024, 10, 1.0, 0.0, False, False),
    (3200, 1024, 784, 1.0, 0.0, False, True),    # and the two tiled ones
    (1024, 784, 3200, 1.0, 1e-4, True, False),
    (67, 10, 17, 2.0, 5.0, True, False),         # transposed problems
    (10, 17, 67, 2.0, -2.0, False, True),
], ids=lambda c: "x".join(map(str, c[:3])) + "tn"[c[5]] + "tn"[c[6]])
@pytest.mark.parametrize("version", ["hierarchical+thin", "cuda-c+thin"])
def test_gpu_dispatch(version, case):
    from nnkit.submission import NAMED
    from nnkit.training import make_launcher

    _gpu_check(make_launcher(version, NAMED["solution"]), *case)


@pytest.mark.gpu
def test_gpu_resources_have_no_local_memory():
    from nnkit.gemm_cuda_thin import resources

    rows = resources()
    assert {r["kernel"] for r in rows} == set(KERNELS)
    assert all(r["local_bytes"] == 0 for r in rows), rows
