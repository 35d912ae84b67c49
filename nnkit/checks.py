"""Quick checks of a student's function, in process: what notebooks' test cells and the
student distribution's `make test` call.

    check("gemm_naive", gemm_naive)                 # the visible cases
    check("gemm_naive", gemm_naive, [(1, 1, 1, 2.0, 0.0)])   # cases of your own

A failing case raises AssertionError saying what was wrong; a passing function prints one
line. These are a first test only, on a few small cases: the grader (`make check`) runs
many more, with tighter bounds, under the race and index checker.

Cases, by kind of function:
  GEMM launchers       (M, N, K, alpha, beta) or (M, N, K, alpha, beta, layout), layout
                       "AB", "AtB" (A arrives as a transposed view) or "ABt"
  elementwise kernels  (rows, cols); column_sums: (rows, cols, scale)
  softmax_cross_entropy (rows, classes)
  sgd_update           a shape tuple
  forward, backward, sgd_step   (layer sizes, rows)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from nnkit import network
from nnkit.backend import select, to_device, to_host
from nnkit.gemm import KERNELS, cublas_gemm, gemm
from nnkit.gemm_reference import error_bound, random_operands, reference

GEMM_LAUNCHERS = {function for _, function in KERNELS.values()}
_NET_KERNELS = ("bias_sigmoid", "add_bias", "sigmoid_backward", "softmax_cross_entropy",
                "column_sums", "sgd_update")
# function -> the student module that defines it
MODULES: dict[str, str] = {
    **{function: module for module, function in KERNELS.values()},
    **dict.fromkeys(_NET_KERNELS, "net_1_kernels"),
    **dict.fromkeys(("forward", "backward", "sgd_step"), "net_2_backprop"),
}

VISIBLE: dict[str, list] = {
    **{name: [(5, 7, 3, 1.0, 0.0), (19, 37, 21, 2.0, 5.0, "AtB")] for name in GEMM_LAUNCHERS},
    "bias_sigmoid": [(1, 1), (37, 10)],
    "add_bias": [(1, 1), (37, 10)],
    "sigmoid_backward": [(1, 1), (37, 10)],
    "column_sums": [(1, 1, 1.0), (37, 10, 0.5)],
    "softmax_cross_entropy": [(1, 10), (6, 10)],
    "sgd_update": [(7, 5), (13,)],
    "forward": [([13, 7, 10], 9)],
    "backward": [([13, 7, 10], 9)],
    "sgd_step": [([13, 7, 10], 9)],
}


def _close(name: str, what: str, got: Any, expected: np.ndarray, bound: np.ndarray | float) -> None:
    got = np.asarray(to_host(got), dtype=np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"{name}: {what} has shape {got.shape}, expected {expected.shape}")
    bad = ~(np.abs(got - expected) <= bound)  # NaN compares False: it counts as wrong
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{name}: {what}: {int(bad.sum())} of {bad.size} elements wrong; first at {where}: "
            f"got {got[where]!r}, expected {expected[where]!r}")


def _loose(expected: np.ndarray) -> np.ndarray:
    # float32 results of these small cases are far inside this; a bug is far outside it.
    return 1e-5 + 1e-4 * np.abs(expected)


def _trusted_gemm() -> Callable:
    if select().on_gpu:
        return partial(gemm, cublas_gemm)
    from nnkit.training import host_gemm

    return partial(gemm, host_gemm)


def _check_gemm(name: str, fn: Callable, case: Sequence, seed: int) -> None:
    M, N, K, alpha, beta, *rest = case
    layout = rest[0] if rest else "AB"
    trans_a, trans_b = layout == "AtB", layout == "ABt"
    A, B, C = random_operands(M, N, K, seed, trans_a, trans_b)
    if beta == 0:
        C[:] = np.nan  # output only: its old contents must not reach the result
    opA, opB = (A.T if trans_a else A), (B.T if trans_b else B)
    dA, dB, dC = to_device(A), to_device(B), to_device(C)
    fn(dA.T if trans_a else dA, dB.T if trans_b else dB, dC, alpha, beta)
    label = f"{name} {M}x{N}x{K} {layout} alpha={alpha} beta={beta}"
    C0 = np.nan_to_num(C)
    _close(label, "C", dC, reference(opA, opB, C0, alpha, beta),
           error_bound(opA, opB, C0, alpha, beta))


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _check_elementwise(name: str, fn: Callable, case: Sequence, rng: np.random.Generator) -> None:
    rows, cols = case[0], case[1]
    X = _f32(rng.normal(0.0, 4.0, (rows, cols)))
    b = _f32(rng.normal(0.0, 2.0, cols))
    label = f"{name} {rows}x{cols}"
    x64, b64 = X.astype(np.float64), b.astype(np.float64)
    if name == "column_sums":
        scale = case[2] if len(case) > 2 else 1.0
        out = to_device(np.full(cols, np.nan, np.float32))
        fn(to_device(X), out, scale)
        expected = scale * x64.sum(axis=0)
        _close(label, "out", out, expected, 1e-5 * (1 + abs(scale) * np.abs(x64).sum(axis=0)))
        return
    if name == "sigmoid_backward":
        A = _f32(rng.uniform(0.0, 1.0, (rows, cols)))
        dA = to_device(X)
        fn(dA, to_device(A))
        a64 = A.astype(np.float64)
        expected = x64 * a64 * (1 - a64)
        _close(label, "dA", dA, expected, _loose(expected))
        return
    Z = to_device(X)
    fn(Z, to_device(b))
    expected = x64 + b64 if name == "add_bias" else network.sigmoid(x64 + b64)
    _close(label, "Z", Z, expected, _loose(expected))


def _check_softmax(name: str, fn: Callable, case: Sequence, rng: np.random.Generator) -> None:
    rows, classes = case
    Z = rng.normal(0.0, 3.0, (rows, classes))
    Z[-1] = rng.permutation(np.linspace(-100.0, 100.0, classes))  # past exp's float32 range
    Z = _f32(Z)
    labels = rng.integers(0, classes, rows).astype(np.int64)
    P, dZ, losses = (to_device(np.full(shape, np.nan, np.float32))
                     for shape in ((rows, classes), (rows, classes), (rows,)))
    fn(to_device(Z), to_device(labels), P, dZ, losses)
    per_sample, delta = network.output_loss_and_delta(Z.astype(np.float64), labels, "ce")
    label = f"{name} {rows}x{classes}"
    probs = delta * rows + network.one_hot(labels, classes, np.float64)
    _close(label, "P", P, probs, _loose(probs))
    _close(label, "dZ", dZ, delta, _loose(delta))
    _close(label, "losses", losses, per_sample, _loose(per_sample))


def _check_sgd_update(name: str, fn: Callable, case: Sequence, rng: np.random.Generator) -> None:
    shape = tuple(case)
    P, G = _f32(rng.normal(0, 1, shape)), _f32(rng.normal(0, 1, shape))
    dP = to_device(P)
    fn(dP, to_device(G), 0.3)
    expected = P.astype(np.float64) - np.float32(0.3) * G.astype(np.float64)
    _close(f"{name} {shape}", "P", dP, expected, _loose(expected))


def _check_network(name: str, fn: Callable, case: Sequence, rng: np.random.Generator) -> None:
    sizes, rows = list(case[0]), case[1]
    params = network.glorot_uniform(sizes, int(rng.integers(1 << 30)))
    for b in params.biases:
        b += rng.normal(0, 0.5, b.shape).astype(np.float32)
    X = _f32(rng.uniform(0, 1, (rows, sizes[0])))
    labels = rng.integers(0, sizes[-1], rows).astype(np.int64)
    ref = params.copy(np.float64)
    weights = [to_device(W) for W in params.weights]
    biases = [to_device(b) for b in params.biases]
    label = f"{name} net {'-'.join(map(str, sizes))}, {rows} rows"
    acts64 = network.forward(ref, X.astype(np.float64))
    if name == "forward":
        acts = fn(weights, biases, to_device(X), _trusted_gemm())
        if len(acts) != len(acts64):
            raise AssertionError(f"{label}: returned {len(acts)} arrays, expected {len(acts64)}")
        for layer, (got, expected) in enumerate(zip(acts, acts64, strict=True)):
            _close(label, f"A{layer}", got, expected, _loose(expected))
        return
    if name == "backward":
        acts = [to_device(_f32(a)) for a in acts64]
        grads_W, grads_b, losses = fn(weights, biases, acts, to_device(labels), 0.3,
                                      _trusted_gemm())
        grads, _ = network.backward(ref, acts64, labels, 0.3)
        for layer in range(len(sizes) - 1):
            _close(label, f"dW{layer + 1}", grads_W[layer], grads.weights[layer],
                   _loose(grads.weights[layer]))
            _close(label, f"db{layer + 1}", grads_b[layer], grads.biases[layer],
                   _loose(grads.biases[layer]))
        per_sample, _ = network.output_loss_and_delta(acts64[-1], labels, "ce")
        _close(label, "losses", losses, per_sample, _loose(per_sample))
        return
    gW = [_f32(rng.normal(0, 1, W.shape)) for W in params.weights]
    gb = [_f32(rng.normal(0, 1, b.shape)) for b in params.biases]
    fn(weights, biases, [to_device(g) for g in gW], [to_device(g) for g in gb], 0.2)
    network.sgd_step(ref, network.Params(gW, gb).copy(np.float64), float(np.float32(0.2)))
    for layer in range(len(sizes) - 1):
        _close(label, f"W{layer + 1}", weights[layer], ref.weights[layer],
               _loose(ref.weights[layer]))
        _close(label, f"b{layer + 1}", biases[layer], ref.biases[layer],
               _loose(ref.biases[layer]))


CHECKERS: dict[str, Callable] = {
    "bias_sigmoid": _check_elementwise,
    "add_bias": _check_elementwise,
    "sigmoid_backward": _check_elementwise,
    "column_sums": _check_elementwise,
    "softmax_cross_entropy": _check_softmax,
    "sgd_update": _check_sgd_update,
    "forward": _check_network,
    "backward": _check_network,
    "sgd_step": _check_network,
}


def check(name: str, fn: Callable, cases: Sequence | None = None, seed: int = 0) -> None:
    """Run `fn`, the student's function called `name`, on `cases` (default: the visible
    ones) and raise AssertionError at the first wrong result."""
    if name not in GEMM_LAUNCHERS and name not in CHECKERS:
        raise KeyError(f"no check for {name!r}; known: "
                       f"{', '.join(sorted(GEMM_LAUNCHERS | CHECKERS.keys()))}")
    cases = VISIBLE[name] if cases is None else cases
    for n, case in enumerate(cases):
        if name in GEMM_LAUNCHERS:
            _check_gemm(name, fn, case, seed + n)
        else:
            CHECKERS[name](name, fn, case, np.random.default_rng([seed, n]))
    print(f"{name}: {len(cases)} case(s) passed")
