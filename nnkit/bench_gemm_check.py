"""One GEMM launcher on one shape, as the benchmarks measure it: first checked against
the float64 reference within the float32 bound of nnkit.gemm_reference, then timed
(fastest of `repeats` calls, each ending with a device synchronisation)."""

from __future__ import annotations

import numpy as np

from nnkit.backend import copy_into, to_device, to_host
from nnkit.gemm import gemm
from nnkit.gemm_reference import error_bound, random_operands, reference
from nnkit.timing import best, time_calls

ALPHA, BETA = 2.0, 5.0


def check_and_time(launch, A, B, C0, expected, bound, repeats: int) -> tuple[str, float | None]:
    """('ok', best seconds), or (what went wrong, None). C0 is never modified."""
    C = to_device(to_host(C0))
    try:
        gemm(launch, A, B, C, ALPHA, BETA)
        got = to_host(C).astype(np.float64)
    except Exception as err:  # noqa: BLE001 - report it and go on with the other kernels
        return f"{type(err).__name__}: {err}"[:120], None
    bad = int((~(np.abs(got - expected) <= bound)).sum())
    if bad:
        return f"WRONG: {bad} elements outside the float32 bound", None
    timings = time_calls(lambda: gemm(launch, A, B, C, ALPHA, BETA), repeats=repeats,
                         before_each=lambda: copy_into(C, C0))
    if timings.escaped_events():
        return "work ran outside the timed stream", None
    return "ok", best(timings.counted)


def problem(M: int, N: int, K: int) -> tuple:
    """Device operands A, B, C0 of one shape, the float64 result and its float32 bound."""
    A_h, B_h, C_h = random_operands(M, N, K, seed=M * 7 + N * 3 + K)
    expected = reference(A_h, B_h, C_h, ALPHA, BETA)
    bound = error_bound(A_h, B_h, C_h, ALPHA, BETA)
    A, B, C0 = (to_device(x) for x in (A_h, B_h, C_h))
    return A, B, C0, expected, bound
