"""The GEMM test cases and how their operands are laid out in memory.

Both sides build operands with the same code: the worker (next to the submission) to run
the kernel, the parent to know what the kernel was given and what it must return.

Traps set for every case:
- with beta == 0, C starts as NaN: an element the kernel never writes, or a kernel that
  multiplies the old C by zero (0 * NaN = NaN), is caught;
- "guarded" cases put A, B and C inside larger buffers whose border is NaN (A, B) or a
  sentinel (C), and pass views of the interior: on the GPU, where indexing is unchecked,
  a read past the edge turns the result into NaN and a write past it changes the border;
- a "reuse" case runs in the buffers of the case before it (same shapes, same device
  memory), refilled with new values: a launcher that caches or replays its last result
  returns the old answer. Timed calls likewise get a new A before each call (see
  `perturbed_a`), and a sample of every timed call's C is checked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from nnkit.gemm_reference import random_operands

GUARD = 2  # border width of guarded buffers, in elements
C_SENTINEL = np.float32(-12345.0)


@dataclass(frozen=True)
class GemmCase:
    M: int
    N: int
    K: int
    alpha: float = 2.0
    beta: float = 5.0
    trans_a: bool = False
    trans_b: bool = False
    guard: bool = False
    seed: int = 0
    reuse: bool = False  # run in the previous case's buffers, refilled (see module doc)

    def label(self) -> str:
        form = {(False, False): "AB", (True, False): "AᵀB", (False, True): "ABᵀ"}.get(
            (self.trans_a, self.trans_b), "AᵀBᵀ"
        )
        text = f"{self.M}x{self.N}x{self.K} {form} α={self.alpha:g} β={self.beta:g}"
        text += " guarded" if self.guard else ""
        return text + (", again in the same buffers with new values" if self.reuse else "")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> GemmCase:
        return cls(**data)


def cases_of(shapes: list[tuple], seed0: int) -> list[GemmCase]:
    out = []
    for n, (M, N, K, alpha, beta, ta, tb, guard) in enumerate(shapes):
        out.append(GemmCase(M, N, K, alpha, beta, bool(ta), bool(tb), bool(guard), seed0 + n))
    return out


# (M, N, K, alpha, beta, trans_a, trans_b, guard). Sized for the CPU simulator, where every
# CUDA thread is a Python thread: a 32x32-thread block costs about a second per K tile.
SIMULATOR_SHAPES = [
    (1, 1, 1, 1.0, 0.0, 0, 0, 1),
    (17, 5, 3, 2.0, 5.0, 0, 0, 0),
    (3, 67, 17, 2.0, 0.0, 1, 0, 1),
    (20, 9, 70, -1.5, 5.0, 0, 1, 0),
    (33, 40, 37, 2.0, 5.0, 0, 0, 1),
    (17, 65, 36, 0.5, -2.0, 1, 1, 0),
]
# Long sums per kernel, as long as the simulator affords: each step along K costs the
# naive kernel nothing extra, the register kernel two barriers of 64 Python threads, and
# the shared kernel (1024 threads a block) far more.
SIMULATOR_LONG_K = {
    "naive": [(2, 3, 1013, 2.0, 5.0, 0, 0, 1), (1, 67, 67, 2.0, 0.0, 0, 1, 0)],
    "shared": [],
    "register": [(2, 3, 259, 2.0, 5.0, 0, 0, 1), (1, 67, 67, 2.0, 0.0, 0, 1, 0)],
}

# On the GPU: the above, the CME 213 grading sizes, backprop's transposed forms, odd sizes.
GPU_SHAPES = SIMULATOR_SHAPES + SIMULATOR_LONG_K["naive"] + [
    (800, 1000, 784, 2.0, 5.0, 0, 0, 0),
    (800, 10, 1000, 2.0, 5.0, 0, 0, 1),
    (1013, 67, 1013, 2.0, 0.0, 1, 0, 1),
    (67, 1013, 1013, 2.0, 5.0, 0, 1, 1),
    (1000, 784, 800, 1.0, 0.0, 1, 0, 0),  # W1 gradient: delta^T X
    (800, 784, 1000, 1.0, 0.0, 0, 0, 0),
    (1, 1013, 1, 2.0, 5.0, 0, 0, 1),
    (1013, 1, 67, 2.0, 5.0, 0, 0, 1),
    (513, 257, 129, 2.0, 5.0, 1, 1, 1),
]

# Performance: CME 213's two grading products and a square one, alpha = 2, beta = 5.
PERF_SHAPES = [(800, 1000, 784), (800, 10, 1000), (2048, 2048, 2048)]


REPLAY_AFTER = 1  # the 17x5x3 case is called a second time, in its own buffers
REPLAY_SEED = 199


def correctness_cases(on_gpu: bool, kernel: str) -> list[GemmCase]:
    shapes = GPU_SHAPES if on_gpu else SIMULATOR_SHAPES + SIMULATOR_LONG_K[kernel]
    cases = cases_of(shapes, seed0=100)
    again = replace(cases[REPLAY_AFTER], seed=REPLAY_SEED, reuse=True)
    return cases[:REPLAY_AFTER + 1] + [again] + cases[REPLAY_AFTER + 1:]


def perf_cases() -> list[GemmCase]:
    return [GemmCase(M, N, K, 2.0, 5.0, seed=900 + n) for n, (M, N, K) in enumerate(PERF_SHAPES)]


SAMPLES = 1024  # elements of C checked after every timed call


def perturbed_a(A_buf: np.ndarray, call: int) -> np.ndarray:
    """A as given to timed call number `call` (warm-up calls included): scaled by
    1 + (call + 1)/64, so that no two calls see the same operands and a replayed result is
    wrong. Both sides compute it with the same float32 product, bit for bit."""
    return A_buf * np.float32(1.0 + (call + 1) / 64.0)


def sample_positions(case: GemmCase) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the elements of C sampled after each timed call."""
    rng = np.random.default_rng(case.seed + 7)
    flat = rng.choice(case.M * case.N, size=min(SAMPLES, case.M * case.N), replace=False)
    return np.divmod(np.sort(flat), case.N)


@dataclass
class Operands:
    """Host buffers of one case and the views the kernel is given."""

    A_buf: np.ndarray
    B_buf: np.ndarray
    C_buf: np.ndarray
    interior: tuple[slice, slice]

    def views(self, bufs: tuple | None = None) -> tuple:
        """(A, B, C) as stored: interiors of the (given, default host) buffers."""
        A_buf, B_buf, C_buf = bufs if bufs is not None else (self.A_buf, self.B_buf, self.C_buf)
        return A_buf[self.interior], B_buf[self.interior], C_buf[self.interior]


def _embed(X: np.ndarray, guard: bool, fill: np.float32) -> np.ndarray:
    if not guard:
        return X.copy()
    buf = np.full((X.shape[0] + 2 * GUARD, X.shape[1] + 2 * GUARD), fill, dtype=np.float32)
    buf[GUARD:-GUARD, GUARD:-GUARD] = X
    return buf


def build_operands(case: GemmCase) -> Operands:
    """The exact bytes the kernel starts from (C already poisoned when beta == 0)."""
    A, B, C = random_operands(case.M, case.N, case.K, case.seed, case.trans_a, case.trans_b)
    if case.beta == 0.0:
        C[:] = np.nan
    interior = (slice(GUARD, -GUARD), slice(GUARD, -GUARD)) if case.guard else (
        slice(None), slice(None))
    return Operands(
        _embed(A, case.guard, np.float32(np.nan)),
        _embed(B, case.guard, np.float32(np.nan)),
        _embed(C, case.guard, C_SENTINEL),
        interior,
    )
