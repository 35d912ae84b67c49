"""What the benchmark ran on, and the fastest matrix product each device manages.

The peak GEMM rate is the roofline of the benchmark's GFLOP/s plots: the network is
almost all matrix products, so no implementation can beat a large SGEMM of the best
library on the same device by much, and the gap to it says how much is left.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from nnkit.paper.blas import blas_info, blas_threads, cores


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_name() -> str | None:
    from nnkit.backend import select

    backend = select()
    return backend.detail if backend.on_gpu else None


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def describe() -> dict:
    """Date, CPU, cores, BLAS (from threadpoolctl), numba's threading, GPU, versions."""
    return {
        "date": datetime.date.today().isoformat(),
        "host": platform.node(),
        "cpu": cpu_model(),
        "cores": cores(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "blas": blas_info(),
        "numba_threads": _numba().config.NUMBA_NUM_THREADS,
        "numba_threading_layer": _threading_layer(),
        "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT", "default"),
        "gpu": gpu_name(),
        "versions": {p: _version(p) for p in ("numpy", "numba", "numba-cuda", "threadpoolctl",
                                             "cupy-cuda13x", "cupy-cuda12x", "torch")
                     if _version(p)},
        "python": platform.python_version(),
    }


def _numba() -> Any:  # the numba module, imported once the backend is chosen
    from nnkit.paper.jit import numba

    return numba


def _threading_layer() -> str:
    try:
        return _numba().threading_layer()
    except ValueError:  # no parallel function has run yet
        return "not started"


def finish(machine: dict) -> dict:
    """Add what is known only after the run: the load at its end, numba's threading."""
    if hasattr(os, "getloadavg"):
        machine["load_average_end"] = os.getloadavg()
    machine["numba_threading_layer"] = _threading_layer()
    return machine


def summary(machine: dict) -> str:
    """One paragraph for the report."""
    blas = ", ".join(f"{b['internal_api']} {b['version']} ({b.get('architecture', '?')}, "
                     f"{b.get('threading_layer', '?')})" for b in machine["blas"]) or "none"
    load, end = machine.get("load_average"), machine.get("load_average_end")
    load_text = f", load {load[0]:.2f} at the start" if load else ""
    load_text += f" and {end[0]:.2f} at the end" if end else ""
    return (f"{machine['date']}, {machine['cpu']}, {machine['cores']} cores{load_text}; "
            f"BLAS: {blas}; numba {machine['versions'].get('numba')} "
            f"({machine['numba_threading_layer']} threading); "
            f"GPU: {machine['gpu'] or 'none'}")


def numpy_peak(threads: int | None, n: int = 2048, repeats: int = 3) -> float:
    """GFLOP/s of an n x n x n float32 matmul through NumPy's BLAS, best of `repeats`."""
    rng = np.random.default_rng(0)
    A, B = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    with blas_threads(threads):
        return 2.0 * n ** 3 / _fastest(lambda: A @ B, repeats) / 1e9


def torch_peak(threads: int | None, n: int = 2048, repeats: int = 3) -> float | None:
    """The same with PyTorch on the CPU (its own BLAS), or None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    from nnkit.paper.torch_impl import torch_threads

    A, B = (torch.rand(n, n, dtype=torch.float32) for _ in range(2))
    with torch_threads(threads or cores()):
        return 2.0 * n ** 3 / _fastest(lambda: torch.mm(A, B), repeats) / 1e9


def _fastest(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: thread start, page faults
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def gpu_peak(n: int = 4096, repeats: int = 10) -> float:
    """GFLOP/s of an n x n x n float32 cuBLAS matmul (CuPy), best of `repeats`."""
    import cupy

    A, B = (cupy.random.random((n, n), dtype=cupy.float32) for _ in range(2))
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    A @ B
    best = float("inf")
    for _ in range(repeats):
        start.record()
        A @ B
        stop.record()
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return 2.0 * n ** 3 / best / 1e9


def peaks(quick: bool) -> tuple[dict[str, float], dict[str, str]]:
    """The rooflines, {'CPU, 1 core': ..., 'CPU, N cores': ..., 'GPU': ...} in GFLOP/s,
    each the best library measured on that device, and which library that was."""
    rates: dict[str, float] = {}
    sources: dict[str, str] = {}
    for key, threads in (("CPU, 1 core", 1), (f"CPU, {cores()} cores", None)):
        tried = {"NumPy's BLAS": numpy_peak(threads), "PyTorch": torch_peak(threads)}
        best = max((k for k, v in tried.items() if v), key=lambda k: tried[k] or 0.0)
        rates[key], sources[key] = tried[best] or 0.0, f"{best}, 2048³"
    if gpu_name():
        n = 2048 if quick else 4096
        rates["GPU"], sources["GPU"] = gpu_peak(n), f"cuBLAS, {n}³"
    return rates, sources
