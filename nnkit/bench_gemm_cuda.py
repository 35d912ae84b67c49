"""Version 5 (CUDA C through CuPy, nnkit/gemm_cuda.py) in bench-gemm, beside the numba
versions: `cuda-c` (the tiles `choose` picks per shape) and `cuda-c:BMxBNxBK` (one of
CONFIGS). It is the kit's own kernel, not a student version: the same for every --impl,
and only on a GPU with CuPy (skipped with a message otherwise)."""

from __future__ import annotations

import sys
from functools import partial

from nnkit.gemm import Launcher

NAME = "cuda-c"


def is_cuda_c(kernel: str) -> bool:
    """True for `cuda-c` and `cuda-c:CONFIG` with CONFIG in nnkit.gemm_cuda.CONFIGS."""
    from nnkit.gemm_cuda import CONFIGS

    name, _, config = kernel.partition(":")
    return name == NAME and (not config or config in CONFIGS)


def choices() -> str:
    from nnkit.gemm_cuda import CONFIGS

    return ", ".join([NAME, *(f"{NAME}:{c}" for c in CONFIGS)])


def launchers(kernels: list[str], on_gpu: bool) -> dict[str, Launcher]:
    """The launchers of the cuda-c entries of `kernels`; none, said on stderr, without a
    GPU or without CuPy."""
    wanted = [k for k in kernels if is_cuda_c(k)]
    if not wanted:
        return {}
    if not on_gpu:
        print(f"{NAME} (version 5, CUDA C through CuPy): skipped, it needs a GPU",
              file=sys.stderr)
        return {}
    try:
        import cupy  # noqa: F401
    except ImportError:
        print(f"{NAME}: skipped, CuPy is not installed", file=sys.stderr)
        return {}
    from nnkit.gemm_cuda import gemm_cuda

    return {k: partial(gemm_cuda, config=k.partition(":")[2] or None) for k in wanted}


def resources(kernels: list[str], on_gpu: bool) -> list[dict]:
    """Registers, shared and local memory of every compiled configuration (GPU only)."""
    if not (on_gpu and any(is_cuda_c(k) for k in kernels)):
        return []
    from nnkit import gemm_cuda

    return gemm_cuda.resources()
