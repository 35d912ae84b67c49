"""Version 5, the CUDA C kernel (nnkit/cuda_src/sgemm_warptile.cu, nnkit/gemm_cuda.py).

Without a GPU: the source compiles with nvcc for sm_90 without spills (where the CUDA
toolkit is installed), and its logic runs on the CPU through a C++ emulation (where g++
is: tests/cuda_emulation/emulate_sgemm.cpp). On a GPU: through CuPy on awkward shapes.
Every result is held to the kit's float32 bound (nnkit.gemm_reference).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nnkit.backend import select, to_device, to_host
from nnkit.gemm import gemm
from nnkit.gemm_cuda import CONFIGS, SOURCE, choose, element_strides, vec_flags
from nnkit.gemm_reference import error_bound, random_operands, reference
from tests.conftest import TESTS

EMULATOR = TESTS / "cuda_emulation" / "emulate_sgemm.cpp"
MAX_REGISTERS = 128  # the kernel's __launch_bounds__ target: two 256-thread blocks per SM


def _nvcc() -> str | None:
    home = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    found = home / "bin" / "nvcc"
    return str(found) if found.is_file() else shutil.which("nvcc")


def test_source_compiles_for_sm90_without_spills(tmp_path):
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("no CUDA toolkit (nvcc) here")
    unit = tmp_path / "instances.cu"
    unit.write_text(f'#include "{SOURCE.name}"\n'
                    + "\n".join(c.instantiation() for c in CONFIGS.values()) + "\n")
    result = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", "-c", str(unit), "-I",
                             str(SOURCE.parent), "-o", str(tmp_path / "instances.o"),
                             "--ptxas-options=-v"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = result.stderr
    registers = [int(r) for r in re.findall(r"Used (\d+) registers", report)]
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert len(registers) == len(CONFIGS) and len(spills) == len(CONFIGS), report
    assert max(registers) <= MAX_REGISTERS, report
    assert all(st == "0" and ld == "0" for st, ld in spills), report


def test_choose_fills_the_gpu_with_the_largest_tiles():
    assert choose(4096, 4096, 132) == "128x128x16"
    assert choose(1024, 3200, 132) == "128x128x16"  # 8 x 25 = 200 blocks
    assert choose(800, 1000, 132) == "64x64x16"  # 7 x 8 and 7 x 16 blocks leave SMs idle
    assert choose(1, 1, 132) == "64x64x16"


def test_flags_and_strides_follow_the_layout():
    assert element_strides((3, 5), (20, 4), "A") == (5, 1)
    with pytest.raises(ValueError, match="32-bit"):
        element_strides((2**16, 2**16), (2**18, 4), "A")
    with pytest.raises(ValueError, match="whole float32"):
        element_strides((3, 5), (20, 2), "A")
    row_major = (8, 1)
    assert vec_flags((0, 16, 32), (row_major, row_major, row_major)) == 7
    assert vec_flags((4, 16, 32), (row_major, (1, 8), (6, 1))) == 0  # misaligned; transposed; ld 6


# --- the kernel's logic on the CPU ------------------------------------------------------


@pytest.fixture(scope="module")
def emulators(tmp_path_factory):
    """The emulation compiled once per configuration (name -> executable)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ to build the CPU emulation")
    out = tmp_path_factory.mktemp("emulate")
    built = {}
    for name, c in CONFIGS.items():
        exe = out / f"emulate_{name}"
        cfg = ",".join(str(v) for v in (c.BM, c.BN, c.BK, c.WM, c.WN, c.WMITER, c.WNITER))
        subprocess.run([gxx, "-std=c++20", "-O1", "-pthread", f"-DCFG={cfg}", "-I",
                        str(SOURCE.parent), str(EMULATOR), "-o", str(exe)], check=True)
        built[name] = exe
    return built


def _embed(X: np.ndarray, layout: str, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """(1-D buffer, view of it equal to X): row-major, transposed storage ('t': the view is
    X stored as X.T, read through .T), 'guarded': inside a buffer with a border of `fill`
    and a row length that is not a multiple of 4, starting one element in, or 'padded':
    rows of a multiple of 4 that end in `fill` (float4 rows, any column count)."""
    rows, cols = X.shape
    if layout == "row":
        buf = X.copy().ravel()
        return buf, buf.reshape(rows, cols)
    if layout == "t":
        buf = np.ascontiguousarray(X.T).ravel()
        return buf, buf.reshape(cols, rows).T
    ld, start = (cols + 3, 1) if layout == "guarded" else ((cols + 3) // 4 * 4 + 4, 0)
    buf = np.full((rows + 2) * ld, fill, np.float32)
    view = buf[ld + start:ld + start + rows * ld].reshape(rows, ld)[:, :cols]
    view[...] = X
    return buf, view


def _emulate(exe: Path, tmp: Path, A, B, C, alpha, beta, layouts) -> tuple:
    """Run the emulation on views of A, B, C; return (C's view after, C's whole buffer)."""
    bufs, views = zip(*(_embed(X, lay, fill) for X, lay, fill in
                        zip((A, B, C), layouts, (np.nan, np.nan, 7.0), strict=True)),
                      strict=True)
    offsets = [(v.__array_interface__["data"][0] - b.__array_interface__["data"][0]) // 4
               for b, v in zip(bufs, views, strict=True)]
    strides = tuple(element_strides(v.shape, v.strides, n) for v, n in zip(views, "ABC",
                                                                          strict=True))
    vec = vec_flags(tuple(4 * o for o in offsets), strides)  # the emulation's buffers are aligned
    (tmp / "in.bin").write_bytes(b"".join(b.tobytes() for b in bufs))
    M, K = A.shape
    N = B.shape[1]
    args = [M, N, K, repr(float(alpha)), repr(float(beta)), *(s for pair in strides for s in pair),
            vec, *offsets, *(b.size for b in bufs), tmp / "in.bin", tmp / "out.bin"]
    subprocess.run([str(exe), *map(str, args)], check=True, timeout=120)
    out = np.fromfile(tmp / "out.bin", np.float32)
    positions = np.arange(out.size)  # C's elements in its buffer, through the view's strides
    inside = np.zeros(out.size, bool)
    inside[np.lib.stride_tricks.as_strided(
        positions[offsets[2]:], views[2].shape,
        tuple(s * positions.itemsize for s in strides[2]))] = True
    after = np.lib.stride_tricks.as_strided(out[offsets[2]:], views[2].shape, views[2].strides)
    return after.copy(), out[~inside], bufs[2][~inside]


EMULATED = [  # M, N, K, alpha, beta, layouts of A, B, C
    (1, 1, 1, 2.0, 5.0, ("row", "row", "row")),
    (17, 5, 3, 2.0, 0.0, ("row", "row", "row")),
    (8, 12, 16, -1.5, 5.0, ("row", "row", "row")),  # vector path throughout
    (8, 12, 16, -1.5, 0.0, ("row", "row", "row")),
    (129, 131, 67, 0.5, -2.0, ("row", "row", "row")),
    (33, 68, 35, 2.0, 5.0, ("t", "t", "row")),
    (67, 66, 20, 1.0, 0.0, ("guarded", "guarded", "guarded")),
    (67, 66, 21, 2.0, 5.0, ("padded", "padded", "padded")),  # float4 rows, ragged edges
]


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("case", EMULATED, ids=lambda c: "x".join(map(str, c[:3])) + c[5][0])
def test_kernel_logic_on_the_cpu(emulators, tmp_path, config, case):
    M, N, K, alpha, beta, layouts = case
    A, B, C = random_operands(M, N, K, seed=M + 7 * N + 11 * K)
    if beta == 0.0:
        C[:] = np.nan  # output only: no NaN may survive
    got, border_after, border_before = _emulate(emulators[config], tmp_path, A, B, C, alpha,
                                                beta, layouts)
    expected, bound = reference(A, B, C, alpha, beta), error_bound(A, B, C, alpha, beta)
    assert np.all(np.abs(got - expected) <= bound), np.nanmax(np.abs(got - expected) / bound)
    assert np.array_equal(border_after, border_before, equal_nan=True), "wrote outside C"


# --- on a GPU, through CuPy --------------------------------------------------------------

GPU_CASES = [  # M, N, K, alpha, beta, trans_a, trans_b
    (1, 1, 1, 2.0, 5.0, False, False),
    (17, 5, 3, 2.0, 0.0, False, False),
    (129, 131, 67, -1.5, 5.0, False, False),
    (129, 131, 67, 0.5, 0.0, True, True),
    (1024, 3200, 784, 2.0, 5.0, False, False),
    (1024, 3200, 784, 1.0, 0.0, False, False),
    (800, 1000, 784, 2.0, -2.0, True, False),
]


@pytest.mark.gpu
@pytest.mark.parametrize("config", [None, *CONFIGS])
@pytest.mark.parametrize("case", GPU_CASES,
                         ids=lambda c: "x".join(map(str, c[:3])) + f"b{c[4]:g}" + "tn"[c[5]]
                         + "tn"[c[6]])
def test_gpu_awkward_shapes(config, case):
    from nnkit.gemm_cuda import gemm_cuda

    assert select().on_gpu
    M, N, K, alpha, beta, trans_a, trans_b = case
    A, B, C = random_operands(M, N, K, seed=M * N + K, trans_a=trans_a, trans_b=trans_b)
    if beta == 0.0:
        C[:] = np.nan
    opA, opB = (A.T if trans_a else A), (B.T if trans_b else B)
    expected, bound = reference(opA, opB, C, alpha, beta), error_bound(opA, opB, C, alpha, beta)
    dA, dB, dC = to_device(A), to_device(B), to_device(C)
    gemm(lambda *a: gemm_cuda(*a, config=config), dA, dB, dC, alpha, beta,
         trans_a=trans_a, trans_b=trans_b)
    got = to_host(dC)
    assert np.all(np.abs(got - expected) <= bound), np.nanmax(np.abs(got - expected) / bound)
    assert np.array_equal(to_host(dA), A) and np.array_equal(to_host(dB), B)


@pytest.mark.gpu
def test_gpu_guarded_views_leave_the_border_alone():
    """A, B, C inside larger buffers (NaN around A and B, a sentinel around C)."""
    import cupy

    from nnkit.gemm_cuda import gemm_cuda

    M, N, K = 130, 67, 35
    A, B, C = random_operands(M, N, K, seed=5)
    bufs = [cupy.full((r + 2, c + 3), fill, cupy.float32)
            for (r, c), fill in zip((A.shape, B.shape, C.shape), (np.nan, np.nan, 7.0),
                                    strict=True)]
    views = [b[1:-1, 1:-2] for b in bufs]
    for v, X in zip(views, (A, B, C), strict=True):
        v[...] = cupy.asarray(X)
    gemm_cuda(*views, 2.0, 5.0)
    got = cupy.asnumpy(views[2])
    expected, bound = reference(A, B, C, 2.0, 5.0), error_bound(A, B, C, 2.0, 5.0)
    assert np.all(np.abs(got - expected) <= bound)
    border = cupy.asnumpy(bufs[2]).copy()
    border[1:-1, 1:-2] = 7.0
    assert np.all(border == 7.0)


# --- bench-gemm's row ---------------------------------------------------------------------


def test_bench_gemm_names_and_skips_version_5(capsys):
    from nnkit.bench_gemm import main
    from nnkit.bench_gemm_cuda import is_cuda_c

    assert is_cuda_c("cuda-c") and is_cuda_c("cuda-c:64x64x16")
    assert not is_cuda_c("cuda-c:64x64x15") and not is_cuda_c("cuda")
    with pytest.raises(SystemExit):
        main(["--kernels", "cuda-c:1x1x1"])
    assert "cuda-c:128x128x16" in capsys.readouterr().err
    if select().on_gpu:
        pytest.skip("on a GPU, version 5 runs (test_gpu_bench_row)")
    assert main(["--shapes", "5x7x3", "--kernels", "cuda-c", "--repeats", "1"]) == 0
    out, err = capsys.readouterr()
    assert "cuda-c (version 5, CUDA C through CuPy): skipped, it needs a GPU" in err
    assert "cuda-c" not in out.split("status", 1)[1].split("\n\n")[0]  # no row in the table


@pytest.mark.gpu
def test_gpu_bench_row(tmp_path):
    import json

    from nnkit.bench_gemm import main

    out = tmp_path / "b.json"
    assert main(["--shapes", "129x131x67", "--kernels", "cuda-c,cuda-c:64x64x16",
                 "--repeats", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    rows = {r["kernel"]: r for r in report["rows"]}
    assert rows["cuda-c"]["status"] == "ok" and rows["cuda-c:64x64x16"]["status"] == "ok"
    assert rows["cuda-c"]["gflops"] > 0
    assert {r["kernel"] for r in report["resources"] if r["version"] == "cuda-c"} == {
        f"sgemm_warptile {c}" for c in CONFIGS}
