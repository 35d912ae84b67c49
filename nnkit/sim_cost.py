"""How long a GPU implementation would take in numba's CUDA simulator: the train commands'
guard against runs that would take hours (a library, shared by nnkit.train_cli and
nnkit.mpi_cli)."""

from __future__ import annotations

from nnkit.training import TrainConfig

# Speed of the CUDA simulator, measured: the naive GEMM does about 1.5e5 multiply-adds a
# second (64^3 in 1.7 s), and starting a CUDA thread (a Python thread) costs about 0.2 ms.
SIMULATOR_MACS_PER_S = 1.5e5
SIMULATOR_THREADS_PER_S = 5e3
SIMULATOR_LIMIT_S = 600


def simulator_seconds(config: TrainConfig, features: int, n_train: int,
                      host_gemm: bool) -> float:
    """A rough time for one epoch of a GPU implementation in the CUDA simulator: the GEMMs'
    multiply-adds, plus one thread per element for the elementwise kernels and updates."""
    sizes = config.sizes(features)
    n_params = sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    batches = -(-n_train // config.batch)
    threads = batches * (4 * min(config.batch, n_train) * sum(sizes[1:]) + n_params)
    macs = 0 if host_gemm else 3 * n_train * (n_params - sum(sizes[1:]))
    return macs / SIMULATOR_MACS_PER_S + threads / SIMULATOR_THREADS_PER_S
