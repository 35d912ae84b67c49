"""Verdicts on a worker's raw GEMM results, computed in the grading process itself.

Nothing the worker wrote is believed except the buffers and timings, and those are checked
against what the grader rebuilds on its own side from the case description.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grader import safe_io
from grader.cases.gemm import GemmCase, Operands, build_operands, replay_operands
from grader.checks.hints import gemm_hint
from grader.results import CaseOutcome
from grader.worker.layout import call_factors, perturbed_a, sample_positions
from nnkit.gemm_reference import FLT_MIN, as_float32_scalar, error_bound, gamma, reference
from nnkit.timing import Timings, best


@dataclass
class GemmOutcome(CaseOutcome):
    """A GEMM case's verdict, with its worst error against the float32 bound."""

    worst_error_ratio: float | None = None  # max |error| / bound; <= 1 passes
    figures: dict = field(default_factory=dict)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _span(indices: np.ndarray) -> str:
    lo, hi = int(indices.min()), int(indices.max())
    return str(lo) if lo == hi else f"{lo}..{hi}"


def _expected(case: GemmCase, ops: Operands) -> tuple[np.ndarray, np.ndarray]:
    A, B, C = ops.views()
    opA = A.T if case.trans_a else A
    opB = B.T if case.trans_b else B
    return reference(opA, opB, C, case.alpha, case.beta), error_bound(opA, opB, C, case.alpha,
                                                                      case.beta)


def hinted(case: GemmCase, ops: Operands, C_after: np.ndarray, message: str) -> str:
    """A wrong-values message with a hint from the errors' pattern (grader/checks/hints.py)
    after it, when one fits; other messages (shape, border) as they are."""
    if C_after.shape != ops.C_buf.shape or C_after.dtype != np.float32 \
            or " elements wrong, in rows " not in message:
        return message
    A, B, C = ops.views()
    try:
        hint = gemm_hint(C_after[ops.interior], A.T if case.trans_a else A,
                         B.T if case.trans_b else B, C, case.alpha, case.beta)
    except (ValueError, FloatingPointError, MemoryError):  # a hint never costs a verdict
        hint = None
    return f"{message}; hint: {hint}" if hint else message


def compare_result(case: GemmCase, ops: Operands, C_after: np.ndarray) -> tuple[bool, str, float]:
    """Check the C buffer after a call: (passed, message, worst error / bound)."""
    if C_after.shape != ops.C_buf.shape or C_after.dtype != np.float32:
        shape = f"{C_after.dtype}{C_after.shape}"
        return False, f"C came back as {shape}, not float32 of the input's shape", np.inf
    border = np.ones(ops.C_buf.shape, dtype=bool)
    border[ops.interior] = False
    if border.any() and not _same_bits(C_after[border], ops.C_buf[border]):
        return False, "wrote outside C (the guard border around C changed)", np.inf
    ref, bound = _expected(case, ops)
    got = C_after[ops.interior].astype(np.float64)
    error = np.abs(got - ref)
    with np.errstate(invalid="ignore"):
        bad = ~(error <= bound)  # NaN counts as bad
    ratio = float(np.nanmax(error / bound)) if np.isfinite(error).any() else np.inf
    if not bad.any():
        return True, f"all {got.size} elements within the float32 bound", ratio
    rows, cols = np.nonzero(bad)
    n_nan = int(np.isnan(got).sum())
    worst = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(error, nan=np.inf), -1)),
                             bad.shape)
    msg = (f"{int(bad.sum())} of {got.size} elements wrong, in rows {_span(rows)} and "
           f"columns {_span(cols)}; C[{worst[0]},{worst[1]}] = {got[worst]:.7g}, "
           f"expected {ref[worst]:.7g} (bound {bound[worst]:.2g})")
    if n_nan:
        msg += (f"; {n_nan} are NaN (never written, a read past the edge of A or B, "
                "or the old C used although beta = 0)")
    return False, msg, ratio


FINDINGS_BYTES = 1 << 20  # the checker keeps at most 50 findings: some 20 KB
FINDINGS_KEPT = 50
TIMINGS_BYTES = 1 << 20


def _finding(raw: object) -> dict | None:
    """A finding as plain scalars (strings cut and cleaned), or None if it is not one."""
    if not isinstance(raw, dict):
        return None
    out = {}
    for key, value in list(raw.items())[:20]:
        key = safe_io.clean_text(key, 40)
        if isinstance(value, bool | int | float) or value is None:
            out[key] = value
        elif isinstance(value, list) and len(value) <= 8 and all(
                isinstance(v, int | str) and not isinstance(v, bool) for v in value):
            out[key] = [safe_io.clean_text(v, 40) if isinstance(v, str) else v for v in value]
        else:
            out[key] = safe_io.clean_text(value, 200)
    return out


def read_findings(path: Path) -> list[dict]:
    """What the simulator's race and index checker wrote for one case (empty if nothing);
    a file that is not what the checker writes counts as a finding."""
    try:
        found = safe_io.read_json(path, FINDINGS_BYTES)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as err:
        return [{"kind": "unreadable findings file", "describe": safe_io.clean_text(err, 200)}]
    if not isinstance(found, list):
        return []
    kept = [f for f in map(_finding, found[:FINDINGS_KEPT]) if f is not None]
    if len(found) > FINDINGS_KEPT:
        kept.append({"kind": f"{len(found) - FINDINGS_KEPT} more findings not shown"})
    return kept


def describe_findings(found: list[dict]) -> str:
    return "; ".join(_describe_finding(f) for f in found[:3])


def _describe_finding(f: dict) -> str:
    where = f"{Path(str(f.get('file', '?'))).name}:{f.get('line', '?')}"
    return f"{where}: {f.get('kind', '?')} on {f.get('array', '?')} (x{f.get('count', 1)})"


# What a case's and a timed case's result files may hold (grader/worker/gemm.py).
CASE_ARRAYS = frozenset({"A", "B", "C", "launch:own", "launch:other", "replay:A", "replay:B",
                         "replay:C", "replay-missing:A", "replay-missing:B",
                         "replay-missing:C"})
PERF_ARRAYS = frozenset({"C", "samples", "extra_C", "launch:own", "launch:other", "replay:C",
                         "replay-missing:C"})
NO_KERNEL = ("the call launched none of the submission's kernels: the result must be "
             "computed by your own kernels on the device")
NOT_REPRODUCED = ("the result is not what the kernels the call launched compute (the grader "
                  "ran them again from the call's inputs and got: {why}); results must come "
                  "from your kernels alone, not from host code, a library or data prepared "
                  "outside them (a copy between device arrays is seen only when made with "
                  "nnkit.backend's copy or copy_into, not as dst[...] = src). An honest "
                  "cause: a kernel that reads memory nothing wrote (an array from empty() or "
                  "device_array(), or beta = 1 on such an output) computes something else "
                  "each time it runs")
NOT_REPRODUCED_ON_NEW = (
    "the kernels the call launched do not compute the product of their inputs (the grader "
    "ran them again, with the same arguments and launch configurations, on new operands "
    "of the same shapes, and got: {why}); the result must be computed by your kernels "
    "from A, B and C, not handed to them by host code as scalars, tuples or launch sizes")


OTHER_KERNELS = ("the call launched kernels that are not the submission's (the kit's own, "
                 "from nnkit): the result must be computed by kernels written in your "
                 "modules")


def other_launches_of(data: dict) -> int:
    """Launches of numba kernels defined outside the submission one call made."""
    value = data.get("launch:other")
    try:
        return int(value) if value is not None and np.asarray(value).size == 1 else 0
    except (TypeError, ValueError):
        return 0


def launches_of(data: dict) -> int:
    """Launches of the submission's own kernels one call made (0 when not recorded)."""
    value = data.get("launch:own")
    try:
        return int(value) if value is not None and np.asarray(value).size == 1 else 0
    except (TypeError, ValueError):
        return 0


def replay_problem(case: GemmCase, ops: Operands, data: dict,
                   replay_ops: Operands | None = None) -> str:
    """'' when the replayed launches reproduce a right C (and leave A and B alone): right
    for `replay_ops` when the replay started from those (new operands), else for `ops`."""
    if any(k.startswith("replay-missing:") for k in data) or "replay:C" not in data:
        return NOT_REPRODUCED.format(why="C is not in memory any recorded kernel touched")
    ops, words = (ops, NOT_REPRODUCED) if replay_ops is None else (replay_ops,
                                                                    NOT_REPRODUCED_ON_NEW)
    for name, before in (("A", ops.A_buf), ("B", ops.B_buf)):
        again = data.get(f"replay:{name}")
        if again is not None and not _same_bits(before, again):
            return words.format(why=f"the kernels modify {name}")
    passed, message, _ = compare_result(case, ops, data["replay:C"])
    return "" if passed else words.format(why=message)


def check_case(case: GemmCase, outdir: Path, n: int, stopped: str,
               findings_fail: bool = True, previous: GemmCase | None = None,
               secret: int = 0, replayed: bool = False) -> GemmOutcome:
    """The verdict on correctness case n; `stopped` says why a missing result is missing.
    For a case that reuses the buffers of `previous`, a wrong C that is the previous
    case's answer is reported as a replayed result. Every case must launch the
    submission's own kernels, and a `replayed` case must be reproduced by them."""
    label = case.label()
    err_file, npz_file = outdir / f"case-{n}.err", outdir / f"case-{n}.npz"
    if os.path.lexists(err_file):
        return GemmOutcome(label, False, "raised " + error_text(err_file))
    if not os.path.lexists(npz_file):
        return GemmOutcome(label, False, f"no result ({stopped})")
    ops = build_operands(case, secret)
    try:
        # The buffers after the call and, replayed, again; the launch counts.
        data = safe_io.load_npz(npz_file, names=CASE_ARRAYS, max_members=len(CASE_ARRAYS),
                                max_bytes=2 * safe_io.npz_cap(safe_io.nbytes(
                                    ops.A_buf, ops.B_buf, ops.C_buf)))
        A_after, B_after, C_after = data["A"], data["B"], data["C"]
    except (OSError, ValueError, KeyError) as err:
        return GemmOutcome(label, False, f"unreadable result ({_reason(err)})")
    for name, before, after in (("A", ops.A_buf, A_after), ("B", ops.B_buf, B_after)):
        if not _same_bits(before, after):
            return GemmOutcome(label, False, f"modified its input {name}")
    passed, message, ratio = compare_result(case, ops, C_after)
    found = read_findings(outdir / f"case-{n}.findings.json")
    if not passed and not found:  # a race explains the pattern better than a hint guesses
        message = hinted(case, ops, C_after, message)
    if launches_of(data) < 1:
        passed, message = False, NO_KERNEL
    elif other_launches_of(data):
        passed, message = False, OTHER_KERNELS
    if passed and replayed:
        problem = replay_problem(case, ops, data, replay_operands(case, secret))
        if problem:
            return GemmOutcome(label, False, problem, ratio)
    if not passed and previous is not None and case.reuse:
        if compare_result(previous, build_operands(previous, secret), C_after)[0]:
            message = ("returned the previous call's result for new operands in the same "
                       "buffers: results must not be cached or replayed between calls")
    outcome = GemmOutcome(label, passed, message, ratio,
                          figures={"simulator_findings": found} if found else {})
    if found:
        outcome.message += f"; the race and index checker found: {describe_findings(found)}"
        if findings_fail:
            outcome.passed = False
    return outcome


@dataclass
class PerfOutcome:
    label: str
    seconds: float | None  # the fastest of the timed calls
    message: str


def check_perf(case: GemmCase, outdir: Path, n: int, stopped: str, secret: int = 0,
               perf_seed: int = 0, own_code: bool = True, prefix: str = "") -> PerfOutcome:
    """Best time of perf case n, provided every timed call launched the submission's own
    kernels (`own_code`; not for cuBLAS) and computed the right C, and the extra call's
    launches, replayed, reproduce its result. prefix: the kernel's in a job that timed
    several (`naive-perf-0.json`)."""
    label = case.label()
    err_file = outdir / f"{prefix}perf-{n}.err"
    if os.path.lexists(err_file):
        return PerfOutcome(label, None, "raised " + error_text(err_file))
    try:
        raw = safe_io.read_json(outdir / f"{prefix}perf-{n}.json", TIMINGS_BYTES)
        timings = Timings(_positive_floats(raw["host"]), _positive_floats(raw["device"]))
        launches = raw.get("launches", [])
        ops = build_operands(case, secret)
        rows = sample_positions(case, perf_seed)[0].size
        calls = max(len(timings.host), len(timings.device or []))
        data = safe_io.load_npz(outdir / f"{prefix}perf-{n}.npz", names=PERF_ARRAYS,
                                max_members=len(PERF_ARRAYS), max_bytes=safe_io.npz_cap(
                                    3 * ops.C_buf.nbytes + 4 * (calls + 1) * rows))
        C_after, samples, extra_C = data["C"], data["samples"], data["extra_C"]
    except FileNotFoundError:
        return PerfOutcome(label, None, f"no timing ({stopped})")
    except (OSError, ValueError, KeyError, TypeError) as err:
        return PerfOutcome(label, None, f"unreadable timing ({_reason(err)})")
    calls = samples.shape[0] if samples.ndim == 2 else 0
    factors = call_factors(perf_seed + n, max(calls, len(timings.host)) + 1)
    if own_code and (len(launches) != calls or not all(
            isinstance(k, int) and k >= 1 for k in launches)):
        return PerfOutcome(label, None, "a timed call launched none of the submission's "
                           "kernels inside the timed interval (work left to run later, or "
                           "done some other way, is not timed)")
    others = raw.get("other_launches", [])
    if own_code and not (isinstance(others, list) and all(k == 0 for k in others)):
        return PerfOutcome(label, None, OTHER_KERNELS.replace("the call", "a timed call"))
    wrong = check_samples(case, ops, samples, max(calls, len(timings.host)), factors,
                          perf_seed)
    if wrong:
        return PerfOutcome(label, None, wrong)
    last = Operands(perturbed_a(ops.A_buf, factors[calls - 1], case.trans_a), ops.B_buf,
                    ops.C_buf, ops.interior)
    passed, message, _ = compare_result(case, last, C_after)
    if not passed:
        return PerfOutcome(label, None, "timed calls computed a wrong C: " + message)
    extra = Operands(perturbed_a(ops.A_buf, factors[calls], case.trans_a), ops.B_buf,
                     ops.C_buf, ops.interior)
    passed, message, _ = compare_result(case, extra, extra_C)
    if not passed:
        return PerfOutcome(label, None, "the untimed check call computed a wrong C: " + message)
    if own_code:
        if launches_of(data) < 1:
            return PerfOutcome(label, None, NO_KERNEL)
        if other_launches_of(data):
            return PerfOutcome(label, None, OTHER_KERNELS)
        # The extra call's replay is checked on C only: A was refilled before it.
        replay = {k: v for k, v in data.items()
                  if k == "replay:C" or k.startswith("replay-missing:C")}
        problem = replay_problem(case, extra, replay)
        if problem:
            return PerfOutcome(label, None, problem)
    if timings.device is None:
        return PerfOutcome(label, None, "no GPU timings")
    if timings.escaped_events():
        return PerfOutcome(label, None, "work ran outside the timed stream (host time "
                           f"{min(timings.host):.2e} s, GPU time {min(timings.device):.2e} s)")
    return PerfOutcome(label, best(timings.counted), "ok")


def check_samples(case: GemmCase, ops: Operands, samples: np.ndarray, calls: int,
                  factors: list[float], perf_seed: int) -> str:
    """'' when the sampled elements of C after every timed call (warm-up included) are
    right for the A that call was given, else what is wrong."""
    rows, cols = sample_positions(case, perf_seed)
    if samples.shape != (calls, rows.size) or samples.dtype != np.float32 or calls < 1:
        return f"expected samples of C after each of {calls} calls, got {samples.dtype}" \
               f"{samples.shape}"
    _, B, C = ops.views()
    opB = (B.T if case.trans_b else B).astype(np.float64)[:, cols]
    C64 = C.astype(np.float64)[rows, cols]
    alpha, beta = as_float32_scalar(case.alpha), as_float32_scalar(case.beta)
    K = opB.shape[0]
    for call in range(calls):
        A = ops.views((perturbed_a(ops.A_buf, factors[call], case.trans_a), ops.B_buf,
                       ops.C_buf))[0]
        opA = (A.T if case.trans_a else A).astype(np.float64)[rows]
        ref = alpha * np.einsum("sk,ks->s", opA, opB)
        magnitude = abs(alpha) * np.einsum("sk,ks->s", np.abs(opA), np.abs(opB))
        if beta != 0.0:  # with beta = 0, C is NaN and must not be read
            ref, magnitude = ref + beta * C64, magnitude + abs(beta) * np.abs(C64)
        bound = gamma(K + 2) * magnitude + (K + 2) * FLT_MIN
        bad = ~(np.abs(samples[call].astype(np.float64) - ref) <= bound)
        if bad.any():
            return (f"timed call {call + 1} of {calls} computed a wrong C ({int(bad.sum())} of "
                    f"{rows.size} sampled elements; every call gets a new A, so a result "
                    "cached or replayed from an earlier call is wrong)")
    return ""


def error_text(path: Path) -> str:
    """What the worker (or the submission) wrote as the error of a case, capped."""
    try:
        return safe_io.read_text(path, safe_io.ERROR_CHARS) or "an exception"
    except (OSError, ValueError) as err:
        return f"an exception (its text unreadable: {_reason(err)})"


def _reason(err: BaseException) -> str:
    return safe_io.clean_text(err, 300)


def _positive_floats(values: object) -> list[float] | None:
    if values is None:
        return None
    if not isinstance(values, list) or not values or len(values) > 10_000 or not all(
            isinstance(v, float) and v > 0 for v in values):
        raise ValueError("timings must be a non-empty list of positive numbers")
    return values
