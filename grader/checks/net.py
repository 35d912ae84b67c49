"""Verdicts on Part 2 results, computed by the grader from raw arrays.

Single kernels are held to elementwise bounds derived from float32 rounding (u = 2^-24,
FLT_MIN the smallest normal float32; every bound adds FLT_MIN for results that underflow):

- add_bias, z + b:            u |z + b|                        (one rounding)
- bias_sigmoid, s(x), x=z+b:  8 u s (1 + |x|)                  (u|x| from rounding x, turned
                              into s(1-s)|x|u by the slope; a few u from exp (CUDA's expf is
                              within 2 ulp), the addition and the division; doubled)
- sigmoid_backward, g a(1-a): 6 u |g| a                        (a product of three or four
                              roundings, measured against |g| a so that a - a*a, which cancels
                              near a = 1, is as acceptable as a*(1-a))
- softmax, per row with s = max|z|, C classes:
      P:      4 u P (2 s + C + 4)     (the shifted argument z - lse is off by a few u times
                                       the row's magnitude; exp turns that into a relative
                                       error of P)
      loss:   4 u (2 s + C)
      dZ:     tol(P) / n + 4 u |dZ|   (P's error, then p - y, the rounded 1/n and the product)
- column_sums, scale * sum_i x_i: gamma(n + 1) |scale| sum_i |x_i|   (any summation order)
- sgd_update, p - lr g:       2 u (|p| + |lr g|)

Whole-network functions (forward, backward) compose many of these through GEMMs; they are
held, array by array, to CME 213's criterion: the max-norm of the difference relative to
the max-norm of the reference at most 1e-4 (= 100 * 1e-6; a float32 GEMM's worst case
gamma(K) stays below it for K up to 1600).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grader import safe_io
from grader.cases.net import build_inputs, layers, replay_inputs
from grader.checks.gemm import (
    NO_KERNEL,
    NOT_REPRODUCED,
    describe_findings,
    error_text,
    launches_of,
    read_findings,
)
from grader.checks.hints import array_hint
from grader.results import CaseOutcome
from nnkit import network
from nnkit.gemm_reference import FLT_MIN, UNIT_ROUNDOFF, gamma

U = UNIT_ROUNDOFF
NORMWISE_TOL = 1e-4

# Arrays each function may write; every other input must come back bit for bit.
WRITES = {"bias_sigmoid": {"Z"}, "add_bias": {"Z"}, "sigmoid_backward": {"dA"},
          "softmax_cross_entropy": {"P", "dZ", "losses"}, "column_sums": {"out"},
          "sgd_update": {"P"}, "forward": set(), "backward": set()}


@dataclass
class UnitOutcome(CaseOutcome):
    """A network function's case verdict; the function decides the item it counts in."""

    function: str = field(kw_only=True)  # the student function, e.g. "softmax_cross_entropy"


def label(case: dict) -> str:
    fn = case["function"]
    if "sizes" in case:
        return f"{fn} net {'-'.join(map(str, case['sizes']))}, {case['rows']} rows"
    if "shape" in case:
        return f"{fn} {'x'.join(map(str, case['shape']))}"
    if "classes" in case:
        return f"{fn} {case['rows']}x{case['classes']}"
    return f"{fn} {case['rows']}x{case['cols']}"


def _f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def expected(case: dict, inp: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, object]]:
    """name -> (float64 reference, elementwise tolerance array, or None for normwise)."""
    fn = case["function"]
    if fn in ("bias_sigmoid", "add_bias"):
        x = _f64(inp["Z"]) + _f64(inp["b"])
        if fn == "add_bias":
            return {"Z": (x, U * np.abs(x) + FLT_MIN)}
        s = network.sigmoid(x)
        return {"Z": (s, 8 * U * s * (1 + np.abs(x)) + FLT_MIN)}
    if fn == "sigmoid_backward":
        g, a = _f64(inp["dA"]), _f64(inp["A"])
        return {"dA": (g * a * (1 - a), 6 * U * np.abs(g) * a + FLT_MIN)}
    if fn == "softmax_cross_entropy":
        Z, labels = _f64(inp["Z"]), inp["labels"]
        n, classes = Z.shape
        logp = network.log_softmax(Z)
        P = np.exp(logp)
        scale = np.abs(Z).max(axis=1, keepdims=True)
        tol_p = 4 * U * P * (2 * scale + classes + 4) + FLT_MIN
        dZ = (P - network.one_hot(labels, classes, np.float64)) / n
        return {"P": (P, tol_p),
                "losses": (-logp[np.arange(n), labels],
                           (4 * U * (2 * scale + classes)).ravel() + FLT_MIN),
                "dZ": (dZ, tol_p / n + 4 * U * np.abs(dZ) + FLT_MIN)}
    if fn == "column_sums":
        X, scale = _f64(inp["X"]), float(np.float32(case["scale"]))
        return {"out": (scale * X.sum(axis=0),
                        gamma(X.shape[0] + 1) * abs(scale) * np.abs(X).sum(axis=0) + FLT_MIN)}
    if fn == "sgd_update":
        return {"P": _sgd(inp["P"], inp["G"], case["lr"])}
    n = layers(case)
    params = network.Params([_f64(inp[f"W{i}"]) for i in range(1, n + 1)],
                            [_f64(inp[f"b{i}"]) for i in range(1, n + 1)])
    if fn == "sgd_step":
        return {k: _sgd(inp[k], inp["d" + k], case["lr"]) for k in params.named()}
    if fn == "forward":
        acts = network.forward(params, _f64(inp["X"]))
        return {f"A{i}": (a, None) for i, a in enumerate(acts)}
    acts = [_f64(inp[f"A{i}"]) for i in range(n + 1)]
    grads, _ = network.backward(params, acts, inp["labels"], float(np.float32(case["lam"])))
    per_sample, _ = network.output_loss_and_delta(acts[-1], inp["labels"], "ce")
    out = {"d" + k: (v, None) for k, v in grads.named().items()}
    out["losses"] = (per_sample, None)
    return out


def _sgd(P: np.ndarray, G: np.ndarray, lr: float) -> tuple[np.ndarray, np.ndarray]:
    step = float(np.float32(lr)) * _f64(G)
    return _f64(P) - step, 2 * U * (np.abs(_f64(P)) + np.abs(step)) + FLT_MIN


def compare(name: str, got: np.ndarray, ref: np.ndarray, tol: object) -> str | None:
    """None if `got` is acceptable, else what is wrong with it."""
    if got.shape != ref.shape:
        return f"{name} has shape {got.shape}, expected {ref.shape}"
    if got.dtype != np.float32:
        return f"{name} is {got.dtype}, expected float32"
    error = np.abs(got.astype(np.float64) - ref)
    nan = int(np.isnan(got).sum())
    if tol is None:  # normwise
        top = float(np.abs(ref).max()) if ref.size else 0.0
        worst = float(np.nanmax(error)) if ref.size and nan < got.size else np.inf
        if nan or worst > NORMWISE_TOL * max(top, FLT_MIN):
            extra = f" ({nan} NaN)" if nan else ""
            return (f"{name}: relative max-norm error {worst / max(top, FLT_MIN):.2e} > "
                    f"{NORMWISE_TOL:g}{extra}")
        return None
    with np.errstate(invalid="ignore"):
        bad = ~(error <= tol)
    if not bad.any():
        return None
    where = np.unravel_index(int(np.argmax(np.where(bad, np.nan_to_num(error, nan=np.inf), -1))),
                             bad.shape)
    at = ",".join(map(str, where))
    msg = (f"{name}: {int(bad.sum())} of {got.size} elements wrong; {name}[{at}] = "
           f"{got[where]:.7g}, expected {ref[where]:.7g}")
    msg += f" ({nan} are NaN)" if nan else ""
    hint = array_hint(got, ref, np.broadcast_to(tol, ref.shape))
    return msg + (f"; hint: {hint}" if hint else "")


def check_unit(case: dict, outdir: Path, n: int, stopped: str,
               findings_fail: bool = True, secret: int = 0,
               replayed: bool = False) -> UnitOutcome:
    """The verdict on unit case n. The call must launch the submission's own kernels,
    and a `replayed` case's launches, run again on the case's other inputs
    (replay_inputs), must compute those inputs' outputs (checked with the same bounds as
    the call's own outputs)."""
    fn, text = case["function"], label(case)
    err_file, npz_file = outdir / f"unit-{n}.err", outdir / f"unit-{n}.npz"
    if os.path.lexists(err_file):
        return UnitOutcome(text, False, "raised " + error_text(err_file), function=fn)
    if not os.path.lexists(npz_file):
        return UnitOutcome(text, False, f"no result ({stopped})", function=fn)
    inputs = build_inputs(case, secret)
    wanted = expected(case, inputs)
    # Inputs as they came back, and outputs (at most float64 versions of the references)
    size = safe_io.nbytes(*inputs.values(), *(ref for ref, _ in wanted.values()))
    try:
        got = safe_io.load_npz(npz_file, max_bytes=safe_io.npz_cap(size),
                               max_members=2 * (len(inputs) + len(wanted)) + 8)
    except (OSError, ValueError) as err:
        return UnitOutcome(text, False,
                           f"unreadable result ({safe_io.clean_text(err, 300)})", function=fn)
    writes = WRITES.get(fn, set(inputs) if fn == "sgd_step" else set())
    if fn == "sgd_step":
        writes = {k for k in inputs if k[0] in "Wb" and k[1:].isdigit()}
    for name, before in inputs.items():
        after = got.get(f"in:{name}")
        if name not in writes and (after is None or after.tobytes() != before.tobytes()):
            return UnitOutcome(text, False, f"modified its input {name}", function=fn)
    if launches_of(got) < 1:
        return UnitOutcome(text, False, NO_KERNEL, function=fn)
    problems = []
    for name, (ref, tol) in wanted.items():
        value = got.get(f"out:{name}")
        if value is None:
            problems.append(f"no output {name}")
            continue
        problem = compare(name, value, ref, tol)
        if problem:
            problems.append(problem)
    if not problems and replayed:
        # The replay ran on the case's other inputs: it must compute their outputs.
        for name, (ref, tol) in expected(case, replay_inputs(case, secret)).items():
            again = got.get(f"replay:out:{name}")
            why = (f"{name} is not in memory any recorded kernel touched" if again is None
                   else compare(name, again, ref, tol))
            if why:
                return UnitOutcome(text, False, NOT_REPRODUCED.format(why=why), function=fn)
    found = read_findings(outdir / f"unit-{n}.findings.json")
    if found:
        problems.append(f"the race and index checker found: {describe_findings(found)}")
    passed = not problems or (not findings_fail and len(problems) == 1 and bool(found))
    return UnitOutcome(text, passed, "; ".join(problems) or "within the float32 bounds",
                       function=fn)


# Agreement of trained parameters (Parts 2 and 3)

AGREEMENT_TOL = 1e-4  # CME 213: relative max-norm of W_gpu - W_cpu at most 100 * 1e-6


def relative_norms(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(relative max-norm, relative L2 norm) of got - ref."""
    ref = ref.astype(np.float64)
    diff = got.astype(np.float64) - ref
    top, norm = float(np.abs(ref).max()), float(np.linalg.norm(ref))
    return (float(np.abs(diff).max()) / max(top, 1e-30),
            float(np.linalg.norm(diff)) / max(norm, 1e-30))
