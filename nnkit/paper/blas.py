"""BLAS, one thread or all cores: the CPU reference network (nnkit/network.py) as it is.

The paper's "Fast Serial" and "Fast Parallel": the same matrix products handed to an
optimised BLAS, which parallelises each product (not the examples). The number of BLAS
threads is set with threadpoolctl, which also says which BLAS library NumPy loaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from nnkit import network
from nnkit.training import ReferenceRunner, TrainConfig


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # scans the loaded libraries once: slow, so kept


@contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Run the body with BLAS limited to `threads` threads (None: all cores)."""
    with _controller().limit(limits=threads or cores(), user_api="blas"):
        yield


def blas_info() -> list[dict]:
    """What threadpoolctl reports for every BLAS library loaded in this process."""
    return [{k: v for k, v in info.items() if k != "filepath"}
            for info in _controller().info() if info.get("user_api") == "blas"]


def runner(params: network.Params, config: TrainConfig) -> ReferenceRunner:
    """The reference runner in float32; the caller sets the BLAS threads around it."""
    return ReferenceRunner(params.copy(), config)
