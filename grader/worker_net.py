"""Worker side of Part 2: call the student's network functions and keep the raw results.

Runs inside the worker process (see grader/worker.py), next to the submission. Matrix
products go through a trusted GEMM (cuBLAS on a GPU, NumPy on the host in the simulator)
so that Part 2 is graded on its own, whatever the state of the student's Part 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from grader.net_cases import FUNCTIONS, build_inputs, layers
from nnkit.backend import select, synchronize, to_device, to_host
from nnkit.submission import load_function


def trusted_gemm_name() -> str:
    return "cublas" if select().on_gpu else "host"


def _lists(dev: dict[str, Any], case: dict) -> tuple[list, list]:
    n = layers(case)
    return ([dev[f"W{i}"] for i in range(1, n + 1)], [dev[f"b{i}"] for i in range(1, n + 1)])


def _named(prefix: str, arrays: Any, what: str) -> dict[str, Any]:
    if not isinstance(arrays, list | tuple):
        raise TypeError(f"{what} returned {type(arrays).__name__}, expected a list of arrays")
    return {f"{prefix}{i}": a for i, a in enumerate(arrays, start=1 if prefix else 0)}


def call(case: dict, fn: Any, dev: dict[str, Any], gemm: Any) -> dict[str, Any]:
    """Call the student's function on device inputs; return its outputs by name."""
    name = case["function"]
    if name in ("bias_sigmoid", "add_bias"):
        fn(dev["Z"], dev["b"])
        return {"Z": dev["Z"]}
    if name == "sigmoid_backward":
        fn(dev["dA"], dev["A"])
        return {"dA": dev["dA"]}
    if name == "softmax_cross_entropy":
        fn(dev["Z"], dev["labels"], dev["P"], dev["dZ"], dev["losses"])
        return {k: dev[k] for k in ("P", "dZ", "losses")}
    if name == "column_sums":
        fn(dev["X"], dev["out"], case["scale"])
        return {"out": dev["out"]}
    if name == "sgd_update":
        fn(dev["P"], dev["G"], case["lr"])
        return {"P": dev["P"]}
    weights, biases = _lists(dev, case)
    if name == "forward":
        return {"A" + k: v for k, v in _named("", fn(weights, biases, dev["X"], gemm),
                                              "forward()").items()}
    if name == "backward":
        acts = [dev[f"A{i}"] for i in range(layers(case) + 1)]
        result = fn(weights, biases, acts, dev["labels"], case["lam"], gemm)
        if not isinstance(result, tuple | list) or len(result) != 3:
            raise TypeError("backward() must return (grads_W, grads_b, losses)")
        grads_W, grads_b, losses = result
        return {**_named("dW", grads_W, "backward()'s grads_W"),
                **_named("db", grads_b, "backward()'s grads_b"), "losses": losses}
    if name == "sgd_step":
        n = layers(case)
        fn(weights, biases, [dev[f"dW{i}"] for i in range(1, n + 1)],
           [dev[f"db{i}"] for i in range(1, n + 1)], case["lr"])
        return {**{f"W{i}": w for i, w in enumerate(weights, 1)},
                **{f"b{i}": b for i, b in enumerate(biases, 1)}}
    raise ValueError(f"unknown function {name}")


def run_units(job: dict, out: Path, submission: Path, save_error: Any) -> None:
    """Every unit case of the job: `unit-N.npz` holding the outputs (prefix out:) and the
    inputs as they are after the call (prefix in:), or `unit-N.err`."""
    from grader.worker import simulator_watch
    from nnkit.training import make_gemm

    gemm = make_gemm(trusted_gemm_name(), submission)
    watch = simulator_watch()
    for n, case in enumerate(job["cases"]):
        try:
            module, _ = FUNCTIONS[case["function"]]
            fn = load_function(submission, module, case["function"])
            host = build_inputs(case)
            dev = {k: to_device(v) for k, v in host.items()}
            with watch(out / f"unit-{n}.findings.json"):
                outputs = call(case, fn, dev, gemm)
            synchronize()
            arrays = {f"out:{k}": _host_array(v, k) for k, v in outputs.items()}
            arrays.update({f"in:{k}": to_host(v) for k, v in dev.items()})
            np.savez(out / f"unit-{n}.npz", **arrays)
        except BaseException as err:  # noqa: BLE001 - any failure of student code is reported
            save_error(out / f"unit-{n}.err", err, submission)


def _host_array(value: Any, name: str) -> np.ndarray:
    if value is None or not hasattr(value, "shape"):
        raise TypeError(f"output {name} is {type(value).__name__}, not a device array")
    return np.asarray(to_host(value))


def run_training(job: dict, out: Path, submission: Path, save_error: Any) -> None:
    """Train the student's network in every mode of the job from the seeded initial
    parameters; `train-M.npz` holds the final parameters, or `train-M.err` the failure."""
    from nnkit import dataset, network
    from nnkit.training import DeviceRunner, TrainConfig, make_gemm, train

    spec = job["data"]
    data = dataset.load(spec["source"], spec["val_fraction"], spec["seed"], spec["pool"],
                        spec["limit"])
    gemm = make_gemm(trusted_gemm_name(), submission)
    for m, mode in enumerate(job["modes"]):
        try:
            config = TrainConfig(**{**mode, "hidden": tuple(mode["hidden"])})
            params = network.glorot_uniform(config.sizes(data.features), config.seed)
            runner = DeviceRunner(submission, params, config, gemm)
            history = train(runner, data, config, evaluate=False)
            np.savez(out / f"train-{m}.npz", **runner.params().named())
            (out / f"train-{m}.json").write_text(json.dumps(history.to_json()))
        except BaseException as err:  # noqa: BLE001
            save_error(out / f"train-{m}.err", err, submission)
