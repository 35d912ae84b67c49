"""The implementations the benchmark compares, with what each needs and its serial twin.

Each entry makes a Runner (nnkit.training's protocol: epoch_data, step, finish_epoch,
params, predict) and sets the threads it may use while it is measured. `serial` names its
serial counterpart, as the paper pairs them for its speedups: the thread-parallel loops
against the naive loops, BLAS on all cores against BLAS on one, and so on. The GPU's
counterpart is the naive serial version, as in the paper.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from nnkit import network
from nnkit.submission import KIT_ROOT, SubmissionError, resolve
from nnkit.training import TrainConfig

Factory = Callable[[network.Params, TrainConfig], Any]


@dataclass(frozen=True)
class Impl:
    name: str
    serial: str  # the name of its serial counterpart (itself, for a serial one)
    device: str  # "cpu" or "gpu": which roofline applies
    what: str  # one line for tables and the handout
    make: Factory
    blas: int | None = 1  # BLAS threads while measured (None: all cores)
    numba: int | None = None  # numba threads while measured (None: all cores)
    torch: int | None = None  # PyTorch threads (None: its default)
    needs: str = ""  # "", "gpu", "torch", "torch-gpu"
    part2: bool = False  # runs the Part 2 network of a folder (see use_network)


def _naive(params: network.Params, config: TrainConfig) -> Any:
    from nnkit.paper.naive import NaiveRunner

    return NaiveRunner(params, config)


def _threads(params: network.Params, config: TrainConfig) -> Any:
    from nnkit.paper.threads import ThreadsRunner

    return ThreadsRunner(params, config)


def _matpar(params: network.Params, config: TrainConfig) -> Any:
    from nnkit.paper import matpar

    return matpar.runner(params, config)


def _blas(params: network.Params, config: TrainConfig) -> Any:
    from nnkit.paper import blas

    return blas.runner(params, config)


# Whose Part 2 network the gpu-* implementations run: the solution where the kit has it
# (the instructors' copy), else the student's starter/ (the student kit has no solution).
_network = {"impl": "solution" if (KIT_ROOT / "solution").is_dir() else "starter"}


def use_network(impl: str) -> None:
    """Run the gpu-* implementations with this folder's network ('solution', 'starter' or
    a path)."""
    _network["impl"] = impl


def _fused(params: network.Params, config: TrainConfig) -> Any:
    from nnkit.paper import fused

    return fused.runner(params, config)


def _solution(gemm: str) -> Factory:
    def make(params: network.Params, config: TrainConfig) -> Any:
        from nnkit.paper import gpu

        return gpu.solution_runner(gemm, params, config, _network["impl"])

    return make


def _cupy(params: network.Params, config: TrainConfig) -> Any:
    from nnkit.paper import gpu

    return gpu.cupy_runner(params, config)


def _torch(device: str) -> Factory:
    def make(params: network.Params, config: TrainConfig) -> Any:
        from nnkit.paper.torch_impl import TorchRunner

        return TorchRunner(params, config, device)

    return make


IMPLS: dict[str, Impl] = {i.name: i for i in [
    Impl("naive", "naive", "cpu", "per-example loops (numba), one thread", _naive, numba=1),
    Impl("threads", "naive", "cpu", "per-example loops, examples split over threads, "
         "partial gradients reduced", _threads),
    Impl("matpar", "naive", "cpu", "batch matrix products as loops (numba), each product "
         "split over threads", _matpar),
    Impl("blas-1", "blas-1", "cpu", "the reference on NumPy/BLAS, one thread", _blas),
    Impl("blas-all", "blas-1", "cpu", "the reference on NumPy/BLAS, all cores", _blas,
         blas=None),
    Impl("blas-fused-1", "blas-fused-1", "cpu", "BLAS products, element-wise passes fused "
         "(numba), one thread", _fused, numba=1),
    Impl("blas-fused", "blas-fused-1", "cpu", "BLAS products, element-wise passes fused "
         "and threaded (numba), all cores", _fused, blas=None),
    Impl("torch-cpu-1", "torch-cpu-1", "cpu", "PyTorch on the CPU, one thread", _torch("cpu"),
         torch=1, needs="torch"),
    Impl("torch-cpu", "torch-cpu-1", "cpu", "PyTorch on the CPU, all cores", _torch("cpu"),
         needs="torch"),
    Impl("gpu-naive", "naive", "gpu", "solution kernels, naive GEMM", _solution("naive"),
         needs="gpu", part2=True),
    Impl("gpu-shared", "naive", "gpu", "solution kernels, shared-memory GEMM",
         _solution("shared"), needs="gpu", part2=True),
    Impl("gpu-register", "naive", "gpu", "solution kernels, register-blocked GEMM",
         _solution("register"), needs="gpu", part2=True),
    Impl("gpu-cublas", "naive", "gpu", "solution kernels, cuBLAS GEMM", _solution("cublas"),
         needs="gpu", part2=True),
    Impl("cupy", "blas-1", "gpu", "CuPy: cuBLAS products, CuPy elementwise kernels", _cupy,
         needs="gpu"),
    Impl("torch-gpu", "torch-cpu-1", "gpu", "PyTorch on the GPU", _torch("cuda"),
         needs="torch-gpu"),
]}

CPU_IMPLS = [name for name, i in IMPLS.items() if i.device == "cpu"]


def available(impl: Impl) -> tuple[bool, str]:
    """Whether it can run here, and why not."""
    if impl.needs in ("gpu", "torch-gpu"):
        from nnkit.backend import select

        backend = select()
        if not backend.on_gpu:
            return False, f"no GPU ({backend.detail}); to be measured on a GPU"
        if impl.part2:
            try:
                resolve(_network["impl"])
            except SubmissionError as err:
                return False, str(err)
    if impl.needs.startswith("torch"):
        from nnkit.paper.torch_impl import available as torch_available

        return torch_available("cuda" if impl.needs == "torch-gpu" else "cpu")
    return True, ""


@contextmanager
def threads_for(impl: Impl) -> Iterator[None]:
    """BLAS, numba and PyTorch threads as the implementation is meant to run."""
    from nnkit.paper.blas import blas_threads, cores
    from nnkit.paper.jit import numba

    with ExitStack() as stack:
        stack.enter_context(blas_threads(impl.blas))
        before = numba.get_num_threads()
        numba.set_num_threads(min(impl.numba or cores(), numba.config.NUMBA_NUM_THREADS))
        stack.callback(numba.set_num_threads, before)
        if impl.needs.startswith("torch"):
            from nnkit.paper.torch_impl import torch_threads

            stack.enter_context(torch_threads(impl.torch))
        yield


def synchronize(impl: Impl) -> None:
    """Wait for the implementation's queued device work (nothing to wait for on a CPU)."""
    if impl.device != "gpu":
        return
    if impl.needs == "torch-gpu":
        import torch

        torch.cuda.synchronize()
    else:
        from nnkit.backend import synchronize as device_sync

        device_sync()
