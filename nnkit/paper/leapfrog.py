"""Leapfrogging backpropagation (Saraiya, seed 004): weight gradients on k interleaved threads.

Backpropagation has a sequential spine, the deltas (the paper's equation 5: the delta of a
layer needs the one above it), and off it the weight gradients (equations 6 and 7: dW_l
needs only delta_l and the layer's input), which nothing else waits for. Leapfrogging
deals those out: counting layers by their depth d from the output (d = 0 is the output
layer), thread j computes the weight gradients at the depths d = j, j + k, j + 2k, ...

Two ways of getting the deltas to the threads:

- "paper", as the paper's Algorithm 1 gives it: every thread walks the delta chain itself
  from the output down to its deepest layer. The threads share nothing but the output
  delta and never wait for one another; each does the whole chain (f2) and a k-th of the
  weight gradients (f3 / k), hence the paper's cost f1 + f2 + f3 / k a pass. (The paper
  also lets the parent thread do the top k - 1 layers before starting the threads, which
  only staggers their starts; here every thread starts from the output delta.)
- "pipelined": one thread walks the chain and publishes each delta; thread j waits for
  the deltas of its depths. The chain is computed once instead of k times, at the price
  of a wait per layer. This is also how the GPU version runs: the chain on one stream,
  the weight gradients of depth d on stream d mod k, an event per delta.

Every thread computes its products exactly as plain backpropagation does (the same
NumPy expressions, nnkit.paper.arraynet's weight_gradient and delta_down with NumPy's own
products), so with the same BLAS settings the gradients are bit for bit those of
nnkit.network.backward. BLAS and NumPy release the GIL inside their loops, so Python
threads do run in parallel; each BLAS call should itself be single-threaded (the caller
limits BLAS to one thread), or k threads of BLAS threads fight over the cores.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any

import numpy as np

from nnkit import network
from nnkit.paper.arraynet import delta_down, numpy_ops, output_delta, weight_gradient

VARIANTS = ("paper", "pipelined")
NUMPY = numpy_ops(np)


def plain_backward(params: network.Params, acts: list[np.ndarray], labels: np.ndarray,
                   lam: float, loss: str = "ce") -> network.Params:
    """Plain backpropagation, one thread, with the same products as the leapfrogging
    threads: nnkit.network.backward without evaluating J (whose L2 term squares every
    weight in float64, work that a comparison of backward passes should not time)."""
    _, dZ = output_delta(np, acts[-1], labels, loss)
    by_depth = []
    for layer in reversed(range(len(params.weights))):
        by_depth.append(weight_gradient(NUMPY, dZ, acts[layer], params.weights[layer], lam))
        if layer > 0:
            dZ = delta_down(NUMPY, dZ, params.weights[layer], acts[layer])
    return network.Params([w for w, _ in by_depth[::-1]], [b for _, b in by_depth[::-1]])


def depths_of(thread: int, k: int, layers: int) -> list[int]:
    """The depths (0 = output layer) whose weight gradients thread `thread` of k computes."""
    return list(range(thread, layers, k))


class Leapfrog:
    """Backward passes with k threads; keep one object for many passes (its pool stays)."""

    def __init__(self, k: int, variant: str = "paper"):
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
        self.k, self.variant = k, variant
        self._pool = ThreadPoolExecutor(k - 1, thread_name_prefix="leapfrog") if k > 1 else None

    def close(self) -> None:
        if self._pool:
            self._pool.shutdown()

    def __enter__(self) -> Leapfrog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def backward(self, params: network.Params, acts: list[np.ndarray], labels: np.ndarray,
                 lam: float, loss: str = "ce") -> network.Params:
        """The gradients of every W and b, as network.backward computes them."""
        weights = params.weights
        L = len(weights)
        _, top = output_delta(np, acts[-1], labels, loss)
        grads_W: list[Any] = [None] * L
        grads_b: list[Any] = [None] * L

        def gradient_at(depth: int, dZ: np.ndarray) -> None:
            layer = L - 1 - depth
            grads_W[layer], grads_b[layer] = weight_gradient(NUMPY, dZ, acts[layer],
                                                             weights[layer], lam)

        def down(depth: int, dZ: np.ndarray) -> np.ndarray:
            layer = L - 1 - depth
            return delta_down(NUMPY, dZ, weights[layer], acts[layer])

        if self.variant == "paper":
            def thread(j: int) -> None:
                mine = depths_of(j, self.k, L)
                dZ = top
                for depth in range(mine[-1] + 1) if mine else ():
                    if depth % self.k == j:
                        gradient_at(depth, dZ)
                    if depth < mine[-1]:
                        dZ = down(depth, dZ)
        else:
            deltas: list[Any] = [top] + [None] * (L - 1)
            ready = [threading.Event() for _ in range(L)]
            ready[0].set()

            def thread(j: int) -> None:
                if j == 0:  # the chain: publish each delta before using it
                    try:
                        for depth in range(L):
                            if depth + 1 < L:
                                deltas[depth + 1] = down(depth, deltas[depth])
                                ready[depth + 1].set()
                            if depth % self.k == 0:
                                gradient_at(depth, deltas[depth])
                    finally:  # on an error, let the waiting threads fail instead of hang
                        for event in ready:
                            event.set()
                    return
                for depth in depths_of(j, self.k, L):
                    ready[depth].wait()
                    if deltas[depth] is None:
                        raise RuntimeError("leapfrog: the delta chain stopped early")
                    gradient_at(depth, deltas[depth])

        futures = [self._pool.submit(thread, j) for j in range(1, self.k)] if self._pool else []
        errors = []
        try:
            thread(0)
        except Exception as err:  # noqa: BLE001 - raised below, once every thread is done
            errors.append(err)
        for f in futures:
            if f.exception() is not None:
                errors.append(f.exception())
        if errors:  # the first is the cause (a failed chain makes the waiting threads fail)
            raise errors[0]
        return network.Params(grads_W, grads_b)


# --------------------------------------------------------------------------------------
# The GPU: k CUDA streams


class HostStreams:
    """Stand-in for CUDA streams on the host (everything runs in order): lets the tests
    check the GPU version's data flow with NumPy."""

    def new(self) -> None:
        return None

    def current(self) -> None:
        return None

    def record(self, stream: Any) -> None:
        return None

    def wait(self, stream: Any, event: Any) -> None:
        return None

    def use(self, stream: Any) -> Any:
        return nullcontext()


class CupyStreams:
    """CUDA streams and events through CuPy."""

    def __init__(self) -> None:
        import cupy

        self.cuda = cupy.cuda

    def new(self) -> Any:
        return self.cuda.Stream(non_blocking=True)

    def current(self) -> Any:
        return self.cuda.get_current_stream()

    def record(self, stream: Any) -> Any:
        return stream.record()

    def wait(self, stream: Any, event: Any) -> None:
        stream.wait_event(event)

    def use(self, stream: Any) -> Any:
        return stream


class StreamLeapfrog:
    """Backward passes with k CUDA streams: the delta chain on the current stream, which
    also takes the weight gradients at depths 0, k, 2k, ...; stream j (1 <= j < k) those at
    depths j, j + k, ..., each after an event says its delta is ready. k = 1 is plain
    backpropagation on one stream."""

    def __init__(self, k: int, xp: Any, streams: Any):
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k, self.xp, self.api = k, xp, streams
        self.ops = numpy_ops(xp)
        self.side = [streams.new() for _ in range(k - 1)]

    def backward(self, weights: list, acts: list, labels: Any, lam: float,
                 loss: str = "ce") -> tuple[list, list]:
        api, L = self.api, len(weights)
        main = api.current()
        _, dZ = output_delta(self.xp, acts[-1], labels, loss)
        # Every delta stays referenced until the end: a delta freed while another stream
        # still reads it could be handed out again by the memory pool of its stream.
        deltas = [dZ]
        grads_W: list[Any] = [None] * L
        grads_b: list[Any] = [None] * L
        joins = []
        for depth in range(L):
            layer = L - 1 - depth
            owner = depth % self.k
            if owner == 0:
                stream = main
                context: Callable[[], Any] = nullcontext
            else:
                stream = self.side[owner - 1]
                api.wait(stream, api.record(main))
                context = lambda s=stream: api.use(s)  # noqa: E731
            with context():
                grads_W[layer], grads_b[layer] = weight_gradient(self.ops, dZ, acts[layer],
                                                                 weights[layer], lam)
            if owner:
                joins.append(api.record(stream))
            if depth + 1 < L:
                dZ = delta_down(self.ops, dZ, weights[layer], acts[layer])
                deltas.append(dZ)
        for event in joins:
            api.wait(main, event)
        return grads_W, grads_b
