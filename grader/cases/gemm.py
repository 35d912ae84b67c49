"""The GEMM test cases and how their operands are laid out in memory.

The grader builds every case's operands, writes them for the worker, and rebuilds them
to know what the kernel was given and what it must return.

Traps set for every case:
- with beta == 0, C starts as NaN: an element the kernel never writes, or a kernel that
  multiplies the old C by zero (0 * NaN = NaN), is caught;
- "guarded" cases put A, B and C inside larger buffers whose border is NaN (A, B) or a
  sentinel (C), and pass views of the interior: on the GPU, where indexing is unchecked,
  a read past the edge turns the result into NaN and a write past it changes the border;
- a "reuse" case runs in the buffers of the case before it (same shapes, same device
  memory), refilled with new values: a launcher that caches or replays its last result
  returns the old answer. Timed calls likewise get a new A before each call (see
  grader/worker/layout.py), and a sample of every timed call's C is checked;
- a replayed case's launches run again on other operands of its layout
  (replay_operands), so that kernels handed the answer by the host reproduce nothing.

Operands are built here, in the grader, and written into each job's folder: the worker
holds no way to build them, and their seeds mix the case's number with a secret of the
grading run (`case_seed`).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from grader.worker.layout import C_SENTINEL, GUARD, GemmCase, Operands
from nnkit.gemm_reference import random_operands

__all__ = ["C_SENTINEL", "GUARD", "GemmCase", "Operands", "build_operands", "case_seed",
           "correctness_cases", "perf_cases"]


def case_seed(number: int, secret: int) -> list[int]:
    """The generator seed of a case: its number mixed with the run's secret, which the
    grader draws at start (`--seed` fixes it) and no job ever sees."""
    return [int(secret) & (2**63 - 1), int(number)]


def derived(secret: int, *labels: str | int) -> int:
    """A seed for one purpose of one job (the timed calls' factors, which cases are
    replayed), from the run's secret: what one job is told says nothing of another's."""
    digest = hashlib.sha256(repr((int(secret), labels)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2


def job_inputs(cases: list[GemmCase], perf: list[GemmCase], secret: int,
               profile: GemmCase | None = None,
               replay: list[int] = ()) -> dict[str, np.ndarray]:
    """The operands a GEMM job receives: `case-N/A`, `.../B`, `.../C`, `perf-N/...`,
    `profile/...`, and for each replayed case N the operands its replay starts from,
    `case-N/replay/A` ... (replay_operands)."""
    arrays = {}
    for n in replay:
        ops = replay_operands(cases[n], secret)
        arrays.update({f"case-{n}/replay/A": ops.A_buf, f"case-{n}/replay/B": ops.B_buf,
                       f"case-{n}/replay/C": ops.C_buf})
    if profile is not None:
        ops = build_operands(profile, secret)
        arrays.update({"profile/A": ops.A_buf, "profile/B": ops.B_buf, "profile/C": ops.C_buf})
    for prefix, group in (("case", cases), ("perf", perf)):
        for n, case in enumerate(group):
            ops = build_operands(case, secret)
            arrays.update({f"{prefix}-{n}/A": ops.A_buf, f"{prefix}-{n}/B": ops.B_buf,
                           f"{prefix}-{n}/C": ops.C_buf})
    return arrays


def replayed_cases(count: int, on_gpu: bool, seed: int) -> list[int]:
    """Which correctness cases are replayed: all on a GPU; in the simulator, where a
    kernel runs a thousand times slower, two drawn from a seed the job never sees
    (a launcher cannot know which of its calls will be checked)."""
    if on_gpu or count <= 2:
        return list(range(count))
    rng = np.random.default_rng(seed)
    return sorted(int(x) for x in rng.choice(count, size=2, replace=False))


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
    # 256 threads a block, one barrier per step of 8: 17 steps, and a transposed B.
    "hierarchical": [(2, 3, 131, 2.0, 5.0, 0, 0, 1), (1, 67, 67, 2.0, 0.0, 0, 1, 0)],
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


# The call whose memory traffic is counted in the simulator (grader/worker/memcount.py),
# per kernel: sizes that are multiples of the solution's tiles (no partial tile's edge
# threads), M and N at least 32 (a warp along either dimension is whole, however the
# kernel maps threads), as small as shows the kernel's steady pattern: counting triples
# the cost of a simulated launch. Plain row-major operands, alpha = 1, beta = 0.
PROFILE_SHAPES = {
    "naive": (32, 32, 16),  # 4 blocks of 32x8 threads
    "shared": (32, 32, 32),  # 1 block of 32x32 threads, 1 step along K
    "register": (64, 64, 16),  # 4 blocks of 64 threads (16x64 tiles), 4 steps
    "hierarchical": (64, 64, 16),  # 1 block of 256 threads (64x64 tile), 2 steps
}


def profile_case(kernel: str) -> GemmCase | None:
    """The counted case of `kernel`, or None for a kernel with none."""
    shape = PROFILE_SHAPES.get(kernel)
    if shape is None:
        return None
    M, N, K = shape
    return GemmCase(M, N, K, 1.0, 0.0, seed=700)


# The graded case whose call is also counted (memcount) in the simulator, for the version
# rule (grader/checks/gemm_structure.py): the 33x40x37 one, large enough that a register
# tile of up to 64x64 leaves fewer threads than half its 1,320 elements of C. Counting the
# graded call itself, not an extra one, means a launcher cannot behave otherwise when
# counted: this call's C is checked as every case's.
COUNTED_SHAPE = (33, 40, 37)


def counted_case(cases: list[GemmCase]) -> int | None:
    """The index of the case counted for the version rule, or None if there is none."""
    return next((n for n, c in enumerate(cases) if (c.M, c.N, c.K) == COUNTED_SHAPE), None)


REPLAY_AFTER = 1  # the 17x5x3 case is called a second time, in its own buffers
REPLAY_SEED = 199


def correctness_cases(on_gpu: bool, kernel: str) -> list[GemmCase]:
    shapes = GPU_SHAPES if on_gpu else SIMULATOR_SHAPES + SIMULATOR_LONG_K[kernel]
    cases = cases_of(shapes, seed0=100)
    again = replace(cases[REPLAY_AFTER], seed=REPLAY_SEED, reuse=True)
    return cases[:REPLAY_AFTER + 1] + [again] + cases[REPLAY_AFTER + 1:]


def perf_cases() -> list[GemmCase]:
    return [GemmCase(M, N, K, 2.0, 5.0, seed=900 + n) for n, (M, N, K) in enumerate(PERF_SHAPES)]


# Seeds of the replays' operands: apart from every case's (cases_of, REPLAY_SEED, profile).
REPLAY_OPERANDS_SEED = 1 << 20


def replay_operands(case: GemmCase, secret: int = 0) -> Operands:
    """The operands a replayed case's launches are run again on: new values of the
    case's layout (guard, poisoned C) that the call never saw. A launcher that computed
    its answer itself and handed it to a kernel as scalars, tuples or a launch
    configuration reproduces it on the call's operands, not on these."""
    return build_operands(replace(case, seed=REPLAY_OPERANDS_SEED + case.seed), secret)


def _embed(X: np.ndarray, guard: bool, fill: np.float32) -> np.ndarray:
    if not guard:
        return X.copy()
    buf = np.full((X.shape[0] + 2 * GUARD, X.shape[1] + 2 * GUARD), fill, dtype=np.float32)
    buf[GUARD:-GUARD, GUARD:-GUARD] = X
    return buf


def build_operands(case: GemmCase, secret: int = 0) -> Operands:
    """The exact bytes the kernel starts from (C already poisoned when beta == 0)."""
    A, B, C = random_operands(case.M, case.N, case.K, case_seed(case.seed, secret),
                              case.trans_a, case.trans_b)
    if case.beta == 0.0:
        C[:] = np.nan
    interior = case.interior()
    return Operands(
        _embed(A, case.guard, np.float32(np.nan)),
        _embed(B, case.guard, np.float32(np.nan)),
        _embed(C, case.guard, C_SENTINEL),
        interior,
    )
