"""Part 2 test cases: inputs for each student function of the network, built by the
grader, written for the worker that calls the function, and rebuilt to check it.

Inputs are a pure function of the case (a plain dict, so it travels as JSON) and of the
grading run's secret (grader/cases/gemm.py `case_seed`), which no job sees. Outputs the
student must write start as NaN, so a value never written cannot pass.
"""

from __future__ import annotations

import numpy as np

from grader.worker.net import BACKPROP_MODULE, FUNCTIONS, ITEMS, KERNELS_MODULE, layers
from nnkit import network

__all__ = ["BACKPROP_MODULE", "FUNCTIONS", "ITEMS", "KERNELS_MODULE", "build_inputs",
           "job_inputs", "layers", "unit_cases"]


def _case(function: str, seed: int, **spec) -> dict:
    return {"function": function, "seed": seed, **spec}


def unit_cases(on_gpu: bool) -> list[dict]:
    """Small awkward shapes everywhere (1 row, rows not a multiple of a block); on a GPU
    also the sizes of the grading network (batch 800, hidden 100 and 1000)."""
    cases = []
    shapes = [(1, 1), (37, 10), (20, 33)] + ([(800, 1000), (67, 1013)] if on_gpu else [])
    for n, (rows, cols) in enumerate(shapes):
        for fn in ("bias_sigmoid", "add_bias", "sigmoid_backward"):
            cases.append(_case(fn, 10 + n, rows=rows, cols=cols))
        cases.append(_case("column_sums", 20 + n, rows=rows, cols=cols, scale=0.5 + n))
    # Past 256 threads along the dimension a launcher may give a thread each: the rows of
    # the element-wise kernels, the columns of column_sums. A grid sized from the other
    # dimension then leaves some unwritten.
    for fn in ("bias_sigmoid", "add_bias", "sigmoid_backward"):
        cases.append(_case(fn, 17, rows=257, cols=3))
    cases.append(_case("column_sums", 27, rows=3, cols=257, scale=0.75))
    # 1,025 rows: more than the largest block of threads, so that a thread-per-row
    # launcher whose grid is sized from the classes fails whatever its block.
    for n, rows in enumerate([1, 37, 6, 1025] + ([800, 1013] if on_gpu else [])):
        cases.append(_case("softmax_cross_entropy", 30 + n, rows=rows, classes=10))
    # Non-square and past one block of threads in each direction (a 1D launch of 256
    # threads or a 2D one of 16 x 16), both ways round: a launcher that sizes its grid
    # from the wrong dimension fails one of them.
    sgd_shapes = [(7, 5), (13,), (37, 70), (70, 37)]
    for n, shape in enumerate(sgd_shapes + ([(1000, 784)] if on_gpu else [])):
        cases.append(_case("sgd_update", 40 + n, shape=list(shape), lr=0.3))
    nets = [([13, 7, 5, 10], 9), ([11, 6, 10], 1)] + ([([784, 100, 10], 800)] if on_gpu else [])
    for n, (sizes, rows) in enumerate(nets):
        for fn in ("forward", "backward", "sgd_step"):
            cases.append(_case(fn, 50 + n, sizes=sizes, rows=rows, lam=0.3, lr=0.2))
    return cases


def _rng(case: dict, secret: int) -> np.random.Generator:
    return np.random.default_rng([int(secret) & (2**63 - 1), case["seed"],
                                  sum(map(ord, case["function"]))])


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _extreme_logits(rng: np.random.Generator, rows: int, classes: int) -> np.ndarray:
    """Logits with rows far beyond float32 exp's range (it overflows past 88.7): a softmax
    without the max shift returns inf or NaN on them."""
    Z = rng.normal(0.0, 3.0, size=(rows, classes))
    patterns = [
        lambda r: r.uniform(-100, 100, classes),           # spread over +-100
        lambda r: -100 + r.normal(0, 1, classes),          # all around -100
        lambda r: 80 + r.normal(0, 1, classes),            # all around +80
        lambda r: np.where(np.arange(classes) == 3, 95.0, -95.0),  # one huge winner
    ]
    for i in range(min(rows, len(patterns))):
        Z[rows - 1 - i] = patterns[i](rng)
    return _f32(Z)


def build_inputs(case: dict, secret: int = 0) -> dict[str, np.ndarray]:
    """The host arrays a case starts from (outputs included, NaN-poisoned)."""
    rng, fn = _rng(case, secret), case["function"]
    if fn in ("bias_sigmoid", "add_bias", "sigmoid_backward", "column_sums"):
        rows, cols = case["rows"], case["cols"]
        X = rng.normal(0.0, 4.0, size=(rows, cols))
        if fn == "bias_sigmoid":  # include arguments whose exp over- and underflows
            every = slice(None, None, max(1, X.size // 3))
            X.flat[every] = rng.choice([-100.0, 100.0, -60.0], size=X.flat[every].size)
            return {"Z": _f32(X), "b": _f32(rng.normal(0, 2, cols))}
        if fn == "add_bias":
            return {"Z": _f32(X), "b": _f32(rng.normal(0, 2, cols))}
        if fn == "sigmoid_backward":
            return {"dA": _f32(X), "A": _f32(rng.uniform(0.0, 1.0, (rows, cols)))}
        return {"X": _f32(X), "out": np.full(cols, np.nan, np.float32)}
    if fn == "softmax_cross_entropy":
        rows, classes = case["rows"], case["classes"]
        return {"Z": _extreme_logits(rng, rows, classes),
                "labels": rng.integers(0, classes, rows).astype(np.int64),
                "P": np.full((rows, classes), np.nan, np.float32),
                "dZ": np.full((rows, classes), np.nan, np.float32),
                "losses": np.full(rows, np.nan, np.float32)}
    if fn == "sgd_update":
        shape = tuple(case["shape"])
        return {"P": _f32(rng.normal(0, 1, shape)), "G": _f32(rng.normal(0, 1, shape))}
    # Whole-network functions: random parameters (biases non-zero, unlike a fresh net).
    sizes, rows = case["sizes"], case["rows"]
    params = network.glorot_uniform(sizes, int(rng.integers(0, 2**31)))
    out = {"X": _f32(rng.uniform(0, 1, (rows, sizes[0]))),
           "labels": rng.integers(0, sizes[-1], rows).astype(np.int64)}
    for name, value in params.named().items():
        out[name] = _f32(value + (rng.normal(0, 0.5, value.shape) if name[0] == "b" else 0))
    if fn == "backward":
        acts = network.forward(_params(out), out["X"])
        out.update({f"A{i}": _f32(a) for i, a in enumerate(acts)})
    if fn == "sgd_step":
        for name, value in _params(out).named().items():
            out["d" + name] = _f32(rng.normal(0, 1, value.shape))
    return out


def _params(inputs: dict[str, np.ndarray]) -> network.Params:
    return network.Params.from_named({k: v for k, v in inputs.items()
                                      if k[0] in "Wb" and k[1:].isdigit()})


def replay_inputs(case: dict, secret: int = 0) -> dict[str, np.ndarray]:
    """Other inputs of the same case (shapes, dtypes and kind of values), drawn from
    another seed: a replayed case's recorded launches run again on these, which the call
    never saw, so that an answer computed on the host and handed to a kernel as its
    arguments (scalars, tuples, the grid) is not reproduced."""
    return build_inputs(case, (secret * 1_000_003 + 7_919) % (2**63))


def job_inputs(cases: list[dict], secret: int,
               replay: list[int] | tuple[int, ...] = ()) -> dict[str, np.ndarray]:
    """What a unit job receives: `unit-N/<name>` for every input of every case, and
    `unit-N-replay/<name>` for the replayed ones."""
    inputs = {f"unit-{n}/{name}": value for n, case in enumerate(cases)
              for name, value in build_inputs(case, secret).items()}
    for n in replay:
        inputs.update({f"unit-{n}-replay/{name}": value
                       for name, value in replay_inputs(cases[n], secret).items()})
    return inputs
