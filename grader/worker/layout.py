"""How a GEMM case's operands sit in memory: the case record, the views the kernel is
given, and what timed calls change between calls. Shared by the worker (which receives
the operands' bytes from the grader) and the grader (which builds them); nothing here
can build a case's values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

GUARD = 2  # border width of guarded buffers, in elements
C_SENTINEL = np.float32(-12345.0)
SAMPLES = 1024  # elements of C checked after every timed call


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
    reuse: bool = False  # run in the previous case's buffers, refilled (grader/cases/gemm.py)

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

    def interior(self) -> tuple[slice, slice]:
        """Where the operands sit inside their (guarded) buffers."""
        if self.guard:
            return slice(GUARD, -GUARD), slice(GUARD, -GUARD)
        return slice(None), slice(None)


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


def perturbed_a(A_buf: np.ndarray, factor: float, trans_a: bool = False) -> np.ndarray:
    """A as given to one timed call: each column k of op(A) (each row of A stored
    transposed) scaled by its own factor, drawn from `factor`, which the grader draws
    afresh for each call from a seed the submission never sees, so that no call can reuse
    or predict an earlier result. One factor for the whole of A would not do: a launcher
    could keep A·B from an earlier call and hand back f·A·B, rescaled in O(MN) work once a
    kernel has read f off one element; A·diag(s)·B leaves no such shortcut. Both sides
    compute it with the same float32 products, bit for bit."""
    axis = 0 if trans_a else 1
    rng = np.random.default_rng([int(np.float64(factor).view(np.uint64)), 13])
    scale = (1.0 + rng.uniform(1 / 64, 1.0, size=A_buf.shape[axis])).astype(np.float32)
    return A_buf * (scale[:, None] if trans_a else scale[None, :])


def call_factors(seed: int, calls: int) -> list[float]:
    """The factors of `calls` timed calls (warm-up calls included), from the job's seed
    (each one the seed of its call's factors per column, perturbed_a)."""
    rng = np.random.default_rng([seed, 7])
    return [float(x) for x in 1.0 + rng.uniform(1 / 64, 1.0, size=calls)]


def sample_positions(case: GemmCase, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the elements of C sampled after each timed call."""
    rng = np.random.default_rng([seed, case.seed, 11])
    flat = rng.choice(case.M * case.N, size=min(SAMPLES, case.M * case.N), replace=False)
    return np.divmod(np.sort(flat), case.N)
