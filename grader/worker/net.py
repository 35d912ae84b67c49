"""Part 2's jobs: call the student's network functions and keep the raw results.

Matrix products go through a trusted GEMM (cuBLAS on a GPU, NumPy on the host in the
simulator) so that Part 2 is graded on its own, whatever the state of the student's
Part 1. Every call is recorded (grader/worker/launches.py): unit cases are replayed from
their inputs, and during training every call's launches of the submission's own kernels
are counted while a few calls, drawn from the job's secret seed, are recorded in full and
replayed.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from grader.worker.common import Context, mark, save_error, save_launches
from grader.worker.launches import COUNT, FULL
from nnkit.backend import synchronize, to_device, to_host
from nnkit.submission import load_function

KERNELS_MODULE = "net_1_kernels"
BACKPROP_MODULE = "net_2_backprop"

# function -> (module, grading item)
FUNCTIONS = {
    "bias_sigmoid": (KERNELS_MODULE, "net.kernels"),
    "add_bias": (KERNELS_MODULE, "net.kernels"),
    "sigmoid_backward": (KERNELS_MODULE, "net.kernels"),
    "softmax_cross_entropy": (KERNELS_MODULE, "net.softmax"),
    "column_sums": (KERNELS_MODULE, "net.column_sums"),
    "sgd_update": (KERNELS_MODULE, "net.sgd"),
    "sgd_step": (BACKPROP_MODULE, "net.sgd"),
    "forward": (BACKPROP_MODULE, "net.forward"),
    "backward": (BACKPROP_MODULE, "net.backward"),
}
ITEMS = ["net.kernels", "net.softmax", "net.column_sums", "net.sgd", "net.forward",
         "net.backward"]


def layers(case: dict) -> int:
    return len(case["sizes"]) - 1


def trusted_gemm_name(on_gpu: bool) -> str:
    return "cublas" if on_gpu else "host"


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


def run_units(ctx: Context) -> None:
    """Every unit case of the job: `unit-N.npz` holding the outputs (prefix out:), the
    inputs as they are after the call (prefix in:), the launch counts and the replay's
    outputs (prefix replay:out:), or `unit-N.err`."""
    from grader.worker.gemm import simulator_watch
    from nnkit.training import make_gemm

    job, out, submission, recorder = ctx.job, ctx.out, ctx.submission, ctx.recorder
    gemm = recorder.gemm_observer(make_gemm(trusted_gemm_name(ctx.on_gpu), submission))
    watch = simulator_watch(ctx.on_gpu)
    replay = set(job.get("replay", []))
    for n, case in enumerate(job["cases"]):
        try:
            module, _ = FUNCTIONS[case["function"]]
            fn = load_function(submission, module, case["function"])
            prefix = f"unit-{n}/"
            host = {k[len(prefix):]: v for k, v in ctx.inputs.items() if k.startswith(prefix)}
            dev = {k: to_device(v) for k, v in host.items()}
            recorder.begin(FULL, [(dev[k], host[k]) for k in host])
            try:
                with watch(out / f"unit-{n}.findings.json"):
                    outputs = call(case, fn, dev, gemm)
                synchronize()
            finally:
                record = recorder.end()
            arrays = {f"out:{k}": _host_array(v, k) for k, v in outputs.items()}
            arrays.update({f"in:{k}": to_host(v) for k, v in dev.items()})
            replayed = None
            if n in replay and record.own_launches:
                refs = {f"out:{k}": recorder.ref_of(v) for k, v in outputs.items()}
                replayed = recorder.replay(record, refs)
            ctx.snapshot.check()
            np.savez(out / f"unit-{n}.npz", **arrays, **save_launches(record, replayed))
        except BaseException as err:  # noqa: BLE001 - any failure of student code is reported
            save_error(out / f"unit-{n}.err", err, submission)
        if n == 0:
            mark("case-0")
    mark("cases")


def _host_array(value: Any, name: str) -> np.ndarray:
    if value is None or not hasattr(value, "shape"):
        raise TypeError(f"output {name} is {type(value).__name__}, not a device array")
    return np.asarray(to_host(value))


class Audited:
    """A student function used in training: each call's own launches are counted, and
    the calls numbered in `full` are recorded in full, replayed and compared."""

    def __init__(self, name: str, fn: Any, ctx: Context, full: set[int], audits: list):
        self.name, self.fn, self.ctx, self.full, self.audits = name, fn, ctx, full, audits
        self.calls = 0
        self.silent = 0  # calls that launched none of the submission's kernels

    def __call__(self, *args: Any) -> Any:
        recorder = self.ctx.recorder
        number = self.calls
        self.calls += 1
        if number not in self.full:
            recorder.begin(COUNT)
            try:
                return self.fn(*args)
            finally:
                if recorder.end().own_launches == 0:
                    self.silent += 1
        inputs = [a for a in _arrays(args)]
        recorder.begin(FULL, [(a, to_host(a)) for a in inputs])
        try:
            result = self.fn(*args)
            synchronize()
        finally:
            record = recorder.end()
        if record.own_launches == 0:
            self.silent += 1
        outputs = {f"{k}": v for k, v in enumerate(_arrays((args, result)))}
        got = {k: to_host(v) for k, v in outputs.items()}
        refs = {k: recorder.ref_of(v) for k, v in outputs.items()}
        replayed = recorder.replay(record, refs) if record.own_launches else {}
        worst, missing = 0.0, 0
        for k, value in got.items():
            again = replayed.get(k)
            if again is None or again.shape != value.shape:
                missing += 1
                continue
            scale = float(np.abs(value).max()) if value.size else 0.0
            diff = float(np.abs(again.astype(np.float64) - value).max()) if value.size else 0.0
            worst = max(worst, diff / max(scale, 1e-30) if np.isfinite(diff) else np.inf)
        self.audits.append({"function": self.name, "call": number, "outputs": len(got),
                            "missing": missing, "worst_relative_difference": worst,
                            "own_launches": record.own_launches})
        return result


def _arrays(value: Any) -> list:
    """Every array in a nest of lists and tuples, in order, each once."""
    found, seen = [], set()

    def walk(v: Any) -> None:
        if isinstance(v, list | tuple):
            for x in v:
                walk(x)
        elif hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, np.generic):
            if id(v) not in seen:
                seen.add(id(v))
                found.append(v)

    walk(value)
    return found


def run_training(ctx: Context) -> None:
    """Train the student's network in every mode of the job from the seeded initial
    parameters; `train-M.npz` holds the final parameters, `train-M.json` the history and
    the audit of its calls, or `train-M.err` the failure."""
    from nnkit import dataset, network
    from nnkit.training import DeviceRunner, TrainConfig, make_gemm, train

    job, out, submission = ctx.job, ctx.out, ctx.submission
    spec = job["data"]
    data = dataset.load(spec["source"], spec["val_fraction"], spec["seed"], spec["pool"],
                        spec["limit"])
    gemm = ctx.recorder.gemm_observer(make_gemm(trusted_gemm_name(ctx.on_gpu), submission))
    mark("data")
    for m, mode in enumerate(job["modes"]):
        try:
            config = TrainConfig(**{**mode, "hidden": tuple(mode["hidden"])})
            params = network.glorot_uniform(config.sizes(data.features), config.seed)
            runner = DeviceRunner(submission, params, config, gemm)
            audits: list[dict] = []
            full = {int(x) for x in job.get("audit_calls", [])}
            wrapped = {name: Audited(name, getattr(runner, name), ctx, full, audits)
                       for name in ("forward", "backward", "sgd_step")}
            for name, fn in wrapped.items():
                setattr(runner, name, fn)
            history = train(runner, data, config, evaluate=False)
            ctx.snapshot.check()
            np.savez(out / f"train-{m}.npz", **runner.params().named())
            (out / f"train-{m}.json").write_text(json.dumps({
                "history": history.to_json(), "audits": audits,
                "calls": {k: w.calls for k, w in wrapped.items()},
                "silent": {k: w.silent for k, w in wrapped.items()}}))
        except BaseException as err:  # noqa: BLE001
            save_error(out / f"train-{m}.err", err, submission)
        mark(f"train-{m}")



def run_speed(ctx: Context) -> None:
    """Time the student's training, every epoch, in the job's one mode: `speed.json`
    holds the seconds of each epoch, `speed.npz` the final parameters (the grader compares
    them with the reference, so that an epoch is only fast by doing its work), or
    `speed.err` the failure. No call is recorded: the recorder's copies would be timed."""
    from nnkit import dataset, network
    from nnkit.training import DeviceRunner, TrainConfig, make_gemm

    job, out, submission, clock = ctx.job, ctx.out, ctx.submission, ctx.clock
    spec = job["data"]
    try:
        data = dataset.load(spec["source"], spec["val_fraction"], spec["seed"], spec["pool"],
                            spec["limit"])
        config = TrainConfig(**{**job["mode"], "hidden": tuple(job["mode"]["hidden"])})
        params = network.glorot_uniform(config.sizes(data.features), config.seed)
        runner = DeviceRunner(submission, params, config,
                              make_gemm(trusted_gemm_name(ctx.on_gpu), submission))
        n = len(data.train)
        slices = dataset.batch_slices(n, config.batch)
        # One untimed step of a throwaway copy compiles the kernels, so that every epoch
        # can be timed and the grader scores them all (a run that did its work in a few
        # epochs and nothing in the others gains nothing).
        spare = DeviceRunner(submission, network.glorot_uniform(config.sizes(data.features),
                                                                config.seed + 1),
                             config, make_gemm(trusted_gemm_name(ctx.on_gpu), submission))
        first = slices[0]
        spare.step(data.train.images[first], data.train.labels[first])
        del spare
        seconds = []
        # The GPU to this job, at its working clock, as Part 1's (grader/worker/window.py)
        with ctx.extra["window"].alone():
            for epoch in range(config.epochs):  # as nnkit.training.train, on the trusted clock
                X, labels = runner.epoch_data(data.train.images, data.train.labels,
                                              dataset.epoch_order(n, config.seed, epoch))
                clock.sync()
                start = clock.now()
                for s in slices:
                    runner.step(X[s], labels[s])
                runner.finish_epoch()
                clock.sync()
                seconds.append(clock.now() - start)
        ctx.snapshot.check()
        np.savez(out / "speed.npz", **runner.params().named())
        (out / "speed.json").write_text(json.dumps({"seconds": seconds}))
    except BaseException as err:  # noqa: BLE001
        save_error(out / "speed.err", err, submission)
