"""Version 5: version 4's hierarchical tiling as CUDA C (nnkit/cuda_src/sgemm_warptile.cu),
compiled at run time by CuPy (cupy.RawModule, NVRTC) and launched with the kit's contract:

    gemm_cuda(A, B, C, alpha, beta)    # C <- alpha * A @ B + beta * C, float32, C is M x N

Row-major, transposed and strided views are all read and written in place through their
strides, without copies: a float4 (128-bit) access where four elements are contiguous and
16-byte aligned, guarded scalar accesses elsewhere (tile edges, other layouts), so views
other than row-major run correctly but slower. The tile sizes are template parameters; a
few configurations are compiled (CONFIGS) and `choose` picks one per shape. GPU with CuPy
only: this module is not a student version and has no simulator path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from nnkit.gemm import operand_shapes

SOURCE = Path(__file__).with_name("cuda_src") / "sgemm_warptile.cu"
KERNEL = "nnkit::sgemm_warptile"
VEC_A, VEC_B, VEC_C = 1, 2, 4  # as in the .cu file
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Config:
    """Block tile BM x BN x BK, warp tile WM x WN in WMITER x WNITER sub-tiles of 4 x 4
    outputs per thread (thread tile 4*WMITER x 4*WNITER)."""

    BM: int
    BN: int
    BK: int
    WM: int
    WN: int
    WMITER: int
    WNITER: int

    @property
    def threads(self) -> int:
        return (self.BM // self.WM) * (self.BN // self.WN) * 32

    @property
    def name_expression(self) -> str:
        return (f"{KERNEL}<{self.BM},{self.BN},{self.BK},{self.WM},{self.WN},"
                f"{self.WMITER},{self.WNITER}>")

    def instantiation(self) -> str:
        """An explicit instantiation, for compiling the source with nvcc outside CuPy."""
        return (f"template __global__ void {self.name_expression}(int, int, int, float, "
                "const float*, int, int, const float*, int, int, float, float*, int, int, int);")


# Largest first: `choose` takes the first whose grid fills the GPU.
CONFIGS: dict[str, Config] = {
    "128x128x16": Config(128, 128, 16, 64, 32, 2, 2),  # 256 threads, 8 x 8 each
    "128x128x8": Config(128, 128, 8, 64, 32, 2, 2),
    "128x64x16": Config(128, 64, 16, 64, 32, 2, 2),  # 128 threads, 8 x 8 each
    "64x64x16": Config(64, 64, 16, 32, 32, 1, 2),  # 128 threads, 4 x 8 each
}


class CudaCUnavailable(RuntimeError):
    """Version 5 needs CuPy and a CUDA GPU."""


def _cupy() -> Any:
    try:
        import cupy
    except ImportError:
        raise CudaCUnavailable(
            "version 5 (CUDA C) is compiled and launched by CuPy, which is not installed: "
            "on a machine with a CUDA GPU, pip install -e '.[gpu]'") from None
    return cupy


@cache
def module() -> Any:
    """The compiled RawModule with every configuration of CONFIGS (compiled once, on first
    use; CuPy caches the binary on disk between runs)."""
    cupy = _cupy()
    return cupy.RawModule(code=SOURCE.read_text(), options=("-std=c++17",),
                          name_expressions=[c.name_expression for c in CONFIGS.values()])


def kernel(config: str) -> Any:
    """The cupy.RawKernel of one configuration (its attributes tell registers, shared and
    local memory)."""
    return module().get_function(CONFIGS[config].name_expression)


def choose(M: int, N: int, sm_count: int) -> str:
    """The largest tiles whose grid still gives every SM a block; the smallest otherwise
    (a product of few large tiles leaves SMs idle)."""
    for name, c in CONFIGS.items():
        if -(-M // c.BM) * -(-N // c.BN) >= sm_count:
            return name
    return name


@cache
def _sm_count(device: int) -> int:
    return int(_cupy().cuda.Device(device).attributes["MultiProcessorCount"])


def element_strides(shape: tuple[int, ...], strides: tuple[int, ...], name: str,
                    itemsize: int = 4) -> tuple[int, int]:
    """Strides in elements, checked to keep every offset within the kernel's 32-bit ints."""
    if any(st % itemsize for st in strides):
        raise ValueError(f"{name}: strides {strides} are not whole float32 elements")
    s = [st // itemsize for st in strides]
    extent = sum((n - 1) * abs(st) for n, st in zip(shape, s, strict=True))
    if extent > INT32_MAX:
        raise ValueError(f"{name}: offsets up to {extent} do not fit the kernel's 32-bit ints")
    return s[0], s[1]


def vectorisable(address: int, s_rows: int, s_cols: int) -> bool:
    """Four consecutive elements of a row form one aligned float4 wherever a row has them."""
    return s_cols == 1 and s_rows % 4 == 0 and address % 16 == 0


def vec_flags(addresses: tuple[int, int, int], strides: tuple[tuple[int, int], ...]) -> int:
    """The kernel's `vec` bits for A, B and C."""
    return sum(bit for bit, address, (s_r, s_c) in zip((VEC_A, VEC_B, VEC_C), addresses,
                                                       strides, strict=True)
               if vectorisable(address, s_r, s_c))


def gemm_cuda(A: Any, B: Any, C: Any, alpha: float, beta: float, *,
              config: str | None = None) -> None:
    """C <- alpha * A @ B + beta * C with the CUDA C kernel (CuPy or CUDA-array-interface
    device arrays). `config` names an entry of CONFIGS; by default `choose` picks one."""
    cupy = _cupy()
    A, B, C = (cupy.asarray(X) for X in (A, B, C))
    M, N, K = operand_shapes(A, B, C)
    if M == 0 or N == 0:
        return
    (sAm, sAk), (sBk, sBn), (sCm, sCn) = strides = tuple(
        element_strides(X.shape, X.strides, label) for X, label in ((A, "A"), (B, "B"), (C, "C")))
    vec = vec_flags((A.data.ptr, B.data.ptr, C.data.ptr), strides)
    name = config or choose(M, N, _sm_count(C.device.id))
    c = CONFIGS[name]
    grid = (-(-N // c.BN), -(-M // c.BM))
    if grid[1] > 65535:
        raise ValueError(f"M = {M}: more than 65535 block rows of {c.BM}")
    i32, f32 = np.int32, np.float32
    kernel(name)(grid, (c.threads,),
                 (i32(M), i32(N), i32(K), f32(alpha), A, i32(sAm), i32(sAk), B, i32(sBk),
                  i32(sBn), f32(beta), C, i32(sCm), i32(sCn), i32(vec)))


def resources() -> list[dict]:
    """Registers, shared and local memory (spills) of every configuration, in the rows of
    nnkit.kernel_resources.format_resources."""
    rows = []
    for name in CONFIGS:
        attributes = kernel(name).attributes  # the CUDA driver's cuFuncGetAttribute
        rows.append({"version": "cuda-c", "kernel": f"sgemm_warptile {name}",
                     "layouts": "any", "registers": int(attributes["num_regs"]),
                     "shared_bytes": int(attributes["shared_size_bytes"]),
                     "local_bytes": int(attributes["local_size_bytes"])})
    return rows
