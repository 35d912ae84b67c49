"""A hint for a wrong result, chosen from the pattern of its errors.

A check says *that* a result is wrong and where; a student learns more from *what kind*
of wrong it is. `gemm_hint` tests a result of D = alpha*A@B + beta*C against the usual
mistakes (beta*C left out, beta ignored, alpha applied twice, the last partial tile along
K skipped, an index swapped, C read although beta = 0, nothing written, a grid too small,
the edge tiles left out) and `array_hint` does the same for any array with an elementwise
bound (the patterns that need no operands). Both return one sentence, or None when no
pattern fits: a hint is given only when the result matches the mistake to float32
accuracy, so a result that is wrong in some other way gets none rather than a misleading
one.

Thresholds. A hypothesis "the kernel computed P instead" holds when every element is
within P's own float32 bound, the one the GEMM check holds results to
(nnkit/gemm_reference.py: gamma(K + 2) times the magnitudes, plus (K + 2) * FLT_MIN),
with one more rounding (K + 3) for the extra operation a mistake may add (alpha*alpha
rounded to float32, alpha applied to acc + C). A constant factor c is read off the best
conditioned element and allowed twice that element's relative bound as its own error.
Region patterns (edge tiles, the first block) need no threshold: they are read off the
mask of wrong elements, which the caller's bound already decided.

Pure functions of numpy arrays: no file, no grader state.
"""

from __future__ import annotations

import numpy as np

from nnkit.gemm_reference import FLT_MIN, as_float32_scalar, gamma

# Candidate tile and block sizes for the region patterns: every kernel of the kit blocks by
# a power of two (8 x 32, 32 x 32, 16 x 64 ...), and a student's choice is one too.
TILES = (4, 8, 16, 32, 64, 128)
MAX_WORK = 1 << 28  # M*N*K beyond which no hint is computed: a few float64 products each
EDGE_COVERAGE = 0.5  # an edge strip must be at least half wrong to blame the bounds

ZERO = ("every element is 0: zeros were stored (a factor that is 0, such as the integer "
        "division 1 // n, or a sum that never ran), nothing was stored, or the values "
        "overflowed or underflowed on the way (exp of a large number is inf)")
GEMM_ZERO = ("every element is 0: no product was summed (a loop over K that never runs, "
             "as with a floor where a ceiling belongs when K is smaller than the tile) or "
             "zeros were stored")
UNCHANGED = ("C came back unchanged: nothing was written (an empty grid, a kernel that "
             "returns early, or the result written into a copy of C rather than into C)")
ALL_NAN_BETA0 = ("every element is NaN: with β = 0 the old C is NaN in this test, and it "
                 "reached the result, or nothing was written; when β = 0, store α·AB "
                 "without reading C (0·NaN is NaN)")
SOME_NAN_BETA0 = ("{n} elements are NaN: with β = 0 the old C is NaN in this test; when "
                  "β = 0 do not read C (0·NaN is NaN), and make sure every element is "
                  "written")
NAN_PAST_EDGE = ("{n} elements are NaN: the memory around A and B is NaN in this test, so "
                 "a load past the edge of A or B reached the result; guard the loads of "
                 "the last, partial tiles (i < M, j < N, k < K). Or a shared tile's entry "
                 "was read before any thread stored it (a thread that returns before it "
                 "loads its part of the tile: see the race checker's finding, if any)")


def _close(got: np.ndarray, pred: np.ndarray, bound: np.ndarray) -> bool:
    """Every element of got within bound of pred (NaN anywhere is not close)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(np.all(np.abs(got - pred) <= bound))


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}..{hi}"


# -- patterns of any array with an elementwise bound -------------------------------------

def constant_factor(got: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> float | None:
    """c when got is c times expected for one c (not 1, not 0) within the bound, else None."""
    with np.errstate(divide="ignore", invalid="ignore"):
        quality = np.where(np.isfinite(expected), np.abs(expected) / bound, 0.0)
    k = int(np.argmax(quality))
    # One well-conditioned element fits any factor: the others must confirm it.
    if np.count_nonzero(quality >= 4) < 2 or not np.isfinite(got.flat[k]):
        return None
    c = float(got.flat[k] / expected.flat[k])
    rho = 2.0 / quality.flat[k]  # the relative error c may carry from its element
    if c == 0.0 or not np.isfinite(c) or abs(c - 1.0) <= 4 * rho:
        return None
    return c if _close(got, c * expected, abs(c) * (bound + rho * np.abs(expected))) else None


def _rect(good: np.ndarray) -> tuple[int, int] | None:
    """(r, c) when the right elements are exactly the top-left block C[:r, :c]."""
    rows, cols = np.nonzero(good)
    if rows.size == 0:
        return None
    r, c = int(rows.max()) + 1, int(cols.max()) + 1
    return (r, c) if rows.size == r * c else None


def _edge(bad: np.ndarray) -> tuple[int, int] | None:
    """(r0, c0) when the wrong elements all lie past the last full tile, in rows >= r0 or
    columns >= c0 (r0 a multiple of one of TILES with a partial tile after it, or M for no
    strip of rows; c0 likewise), and make up at least EDGE_COVERAGE of that strip; the
    smallest such strip."""
    M, N = bad.shape

    def starts(n: int) -> set[int]:
        return {(n // t) * t for t in TILES if 0 < (n // t) * t < n} | {n}

    best = None
    for r0 in starts(M):
        for c0 in starts(N):
            if (r0, c0) == (M, N):
                continue
            strip = np.zeros_like(bad)
            strip[r0:, :] = True
            strip[:, c0:] = True
            size = int(strip.sum())
            if bad[~strip].any() or bad.sum() < EDGE_COVERAGE * size:
                continue
            if best is None or size < best[0]:
                best = (size, r0, c0)
    return None if best is None else best[1:]


GEMM_BOUNDS = ("every load and store guarded by i < M, j < N, k < K; a grid of "
               "ceil(N / block width) by ceil(M / block height) blocks")
ARRAY_BOUNDS = ("every load and store guarded by the array's row and column counts; a grid "
                "that covers every row and column")


def region_hint(bad: np.ndarray, unwritten: np.ndarray | None = None,
                bounds: str = ARRAY_BOUNDS) -> str | None:
    """A hint from where the wrong elements are (bad: 2-D mask); `unwritten` marks elements
    that were never written (NaN or unchanged), to say so; `bounds` says what to check."""
    if bad.ndim != 2 or not bad.any() or bad.all():
        return None
    M, N = bad.shape
    how = "wrong"
    if unwritten is not None and bool(np.all(unwritten[bad])):
        how = "never written"
    edge = _edge(bad)
    if edge is not None:
        r0, c0 = edge
        where = []
        if r0 < M and bad[r0:, :].any():
            where.append(f"rows {_span(r0, M - 1)} of {M}")
        if c0 < N and bad[:, c0:].any():
            where.append(f"columns {_span(c0, N - 1)} of {N}")
        return (f"only elements past the last full tile are {how} ({' and '.join(where)}): "
                f"check the bounds of the last, partial tiles ({bounds})")
    rect = _rect(~bad)
    if rect is not None:
        r, c = rect
        return (f"only the block [0:{r}, 0:{c}] is right and every other element is {how}: "
                f"the grid is too small, it must cover every row and column ({bounds}), "
                "or blockIdx.x and blockIdx.y are used the other way round from how the "
                "grid was sized")
    return None


def _layout_hint(got: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> str | None:
    M, N = expected.shape
    if M == N and M > 1 and _close(got, expected.T, bound.T):
        return ("the result is the transpose of the expected one: the row and column "
                "indices are swapped (rows of C go with threadIdx.y / the row of A, columns "
                "with threadIdx.x / the column of B)")
    if M != N and M > 1 and N > 1 and _close(got, expected.T.reshape(M, N),
                                           bound.T.reshape(M, N)):
        return ("the result was stored column by column (C[j, i] in place of C[i, j], or a "
                "flat index j*M + i): the row and column indices are swapped")
    return None


def array_hint(got: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> str | None:
    """A hint for an array that fails `|got - expected| <= bound`, from patterns that need
    no operands: all zeros, a constant factor, a transpose, wrong edge tiles, a grid too
    small. None when none fits (or the array passes)."""
    got, expected, bound = _f64(got), _f64(expected), _f64(bound)
    if got.shape != expected.shape or got.size == 0:
        return None
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got - expected) <= bound)
    if not bad.any():
        return None
    if np.all(got == 0) and np.any(np.abs(expected) > bound):
        return ZERO
    if np.isfinite(got).all():
        c = constant_factor(got, expected, bound)
        if c is not None:
            return (f"every element is {c:.4g} times the expected value: a scale factor "
                    "applied wrongly or twice")
    if got.ndim == 2:
        return _layout_hint(got, expected, bound) or region_hint(bad, np.isnan(got))
    return None


# -- GEMM: D = alpha * A @ B + beta * C --------------------------------------------------

class _Gemm:
    """The products of one case, computed once, and the prediction of any variant."""

    def __init__(self, A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float,
                 beta: float) -> None:
        self.A, self.B, self.C = _f64(A), _f64(B), _f64(C)
        self.alpha, self.beta = as_float32_scalar(alpha), as_float32_scalar(beta)
        self.K = self.A.shape[1]
        self.ab = self.A @ self.B
        self.mag = np.abs(self.A) @ np.abs(self.B)

    def variant(self, a: float, b: float, ab: np.ndarray | None = None,
                mag: np.ndarray | None = None, extra: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(a*AB + b*C, its float32 bound with `extra` more roundings than a GEMM's)."""
        ab = self.ab if ab is None else ab
        mag = self.mag if mag is None else mag
        pred, size = a * ab, abs(a) * mag
        if b != 0.0:
            pred, size = pred + b * self.C, size + abs(b) * np.abs(self.C)
        n = self.K + 2 + extra
        return pred, gamma(n) * size + n * FLT_MIN


def _scalar_hint(g: _Gemm, got: np.ndarray) -> str | None:
    """alpha and beta used wrongly: which (a, b) the result is a*AB + b*C of."""
    al, be = g.alpha, g.beta
    f32 = as_float32_scalar
    tries = [
        (al, 0.0, "β·C is missing: the result is α·AB alone (add β·C when β ≠ 0)"),
        (al, 1.0, "β is ignored: the result is α·AB + C (multiply the old C by β)"),
        (al, al, "the old C is scaled by α instead of β: the result is α·(AB + C)"),
        (1.0, be, "α is not applied: the result is AB + β·C"),
        (f32(al * al), be, "α is applied twice to AB: the result is α²·AB + β·C"),
        (al, f32(be * be), "β is applied twice: the result is α·AB + β²·C"),
        (be, al, "α and β are swapped: the result is β·AB + α·C"),
        (al, -be, "β·C is subtracted: the result is α·AB − β·C"),
    ]
    for a, b, text in tries:
        if (a, b) == (al, be) or (b != 0.0 and be == 0.0):
            continue  # the right answer, or one that reads C where C is NaN
        if _close(got, *g.variant(a, b)):
            return text
    return None


def _k_hint(g: _Gemm, got: np.ndarray) -> str | None:
    """The sum along K stopped short, or started late: a floor where a ceiling belongs."""
    K = g.K
    stops = sorted({(K // t) * t for t in TILES if (K // t) * t < K} | {K - 1})
    # The partial products A[:, :k] @ B[:k] for every stop, one slice of K at a time: all
    # of them together cost one product.
    ab, mag, done = np.zeros_like(g.ab), np.zeros_like(g.mag), 0
    partial = {}
    for k in stops:
        ab = ab + g.A[:, done:k] @ g.B[done:k, :]
        mag = mag + np.abs(g.A[:, done:k]) @ np.abs(g.B[done:k, :])
        partial[k], done = (ab, mag), k
    for k in reversed(stops):
        if _close(got, *g.variant(g.alpha, g.beta, *partial[k])):
            if k == 0:
                return ("nothing was summed along K: the result is β·C alone (a loop over "
                        "K tiles that never runs when K is smaller than the tile: a floor "
                        "where a ceiling belongs)")
            return (f"the sum along K stops at k = {k} of K = {K}: the last, partial step "
                    "along K is left out (a floor where a ceiling belongs: loop to "
                    "ceil(K / TILE) tiles and guard k < K in the loads)")
    if K > 1:
        first = np.outer(g.A[:, 0], g.B[0, :])
        ab, mag = g.ab - first, g.mag - np.abs(first)
        if _close(got, *g.variant(g.alpha, g.beta, ab, mag)):
            return "the sum along K starts at k = 1: the first product A[i, 0]·B[0, j] is left out"
    return None


def _operand_hint(g: _Gemm, got: np.ndarray) -> str | None:
    """A or B read with its indices swapped (possible only where the shapes allow)."""
    M, N = got.shape
    if M == g.K and M > 1:
        pred, bound = g.variant(g.alpha, g.beta, g.A.T @ g.B, np.abs(g.A.T) @ np.abs(g.B))
        if _close(got, pred, bound):
            return "the result is α·AᵀB + β·C: A is read as A[k, i] where A[i, k] is meant"
    if N == g.K and N > 1:
        pred, bound = g.variant(g.alpha, g.beta, g.A @ g.B.T, np.abs(g.A) @ np.abs(g.B.T))
        if _close(got, pred, bound):
            return "the result is α·ABᵀ + β·C: B is read as B[j, k] where B[k, j] is meant"
    return None


def gemm_hint(got: np.ndarray, A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float,
              beta: float) -> str | None:
    """A hint for a wrong D = alpha*A@B + beta*C: `A` (M x K) and `B` (K x N) are the
    operands as the product uses them (transposed views already applied), `C` the C the
    kernel was given (NaN where beta = 0), `got` the C it returned. None when the result
    is right, or wrong in no way this module recognises."""
    got = _f64(got)
    M, N = got.shape
    if A.shape[0] != M or B.shape[1] != N or C.shape != got.shape or got.size == 0:
        return None
    if M * N * A.shape[1] > MAX_WORK:
        return None
    g = _Gemm(A, B, C, alpha, beta)
    expected, bound = g.variant(g.alpha, g.beta, extra=0)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got - expected) <= bound)
    if not bad.any():
        return None
    nan = np.isnan(got)
    if g.beta == 0.0 and nan.any():
        if nan.all():
            return ALL_NAN_BETA0
        return region_hint(bad, nan, GEMM_BOUNDS) or SOME_NAN_BETA0.format(n=int(nan.sum()))
    if nan.any():  # beta != 0: NaN comes from the NaN border around A and B
        return region_hint(bad, nan, GEMM_BOUNDS) or NAN_PAST_EDGE.format(n=int(nan.sum()))
    unchanged = got == g.C
    if g.beta != 0.0 and unchanged.all():
        return UNCHANGED
    if np.all(got == 0) and np.any(np.abs(expected) > bound):
        return GEMM_ZERO
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    huge = np.isfinite(got) & (np.abs(got) > 1e6 * max(scale, 1.0))
    if huge.any():
        return (f"{int(huge.sum())} element(s) are a million times larger than any "
                "expected value, or more: a sum that did not start at 0 (an accumulator "
                "or a local array read before it was set) adds whatever the memory held")
    found = _scalar_hint(g, got) or _k_hint(g, got) or _operand_hint(g, got)
    if found:
        return found
    c = constant_factor(got, expected, bound)
    if c is not None:
        named = {g.alpha: "α", g.beta: "β"}
        which = next((f" ({v} once too often?)" for k, v in named.items()
                      if k not in (0.0, 1.0) and abs(c - k) <= 1e-6 * abs(k)), "")
        return (f"every element is {c:.4g} times the expected value{which}: α or β applied "
                "wrongly or twice")
    return _layout_hint(got, expected, bound) or region_hint(
        bad, unchanged if g.beta != 0.0 else None, GEMM_BOUNDS)
