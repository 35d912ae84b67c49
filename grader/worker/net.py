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
    replay = set(job.replay)
    for n, case in enumerate(job.cases):
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
                # On the case's other inputs (grader/cases/net.replay_inputs), in the
                # order begin() got them.
                again = f"unit-{n}-replay/"
                fresh = [ctx.inputs[again + k] for k in host] if all(
                    again + k in ctx.inputs for k in host) else None
                replayed = recorder.replay(record, refs, inputs=fresh)
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
    the calls numbered in `full` are recorded in full, replayed and compared.

    `launches` maps a number of own launches to how many calls launched that many: the
    launch pattern, which the grader compares between jobs (a timed run must launch what
    the audited run did). With a `clock`, the seconds spent in fully recorded calls (the
    recorder's copies and the replay) are added to `paused`, which the timed job leaves
    out of its epochs. `labels_arg`: the position of the labels among the arguments, whose
    rows are added to `rows` (what a rank trained on; the kit made that array, so its shape
    is true)."""

    def __init__(self, name: str, fn: Any, recorder: Any, full: set[int], audits: list,
                 *, clock: Any = None, labels_arg: int | None = None):
        self.name, self.fn, self.recorder, self.full, self.audits = (name, fn, recorder,
                                                                     full, audits)
        self.clock, self.labels_arg = clock, labels_arg
        self.calls = self.rows = 0
        self.silent = 0  # calls that launched none of the submission's kernels
        self.launches: dict[int, int] = {}
        self.paused = 0.0

    def _counted(self, own: int) -> None:
        self.launches[own] = self.launches.get(own, 0) + 1
        if own == 0:
            self.silent += 1

    def __call__(self, *args: Any) -> Any:
        recorder = self.recorder
        number = self.calls
        self.calls += 1
        if self.labels_arg is not None:
            self.rows += int(args[self.labels_arg].shape[0])
        if number not in self.full:
            recorder.begin(COUNT)
            try:
                return self.fn(*args)
            finally:
                self._counted(recorder.end().own_launches)
        if self.clock is not None:
            self.clock.sync()
            start = self.clock.now()
        try:
            return self._recorded(number, args)
        finally:
            if self.clock is not None:
                self.clock.sync()
                self.paused += self.clock.now() - start

    def _recorded(self, number: int, args: tuple) -> Any:
        recorder = self.recorder
        kit = [(a, to_host(a)) for a in _arrays(args)]
        before = {id(a): host for a, host in kit}  # the arrays stay alive in args
        recorder.begin(FULL, kit)
        try:
            result = self.fn(*args)
            synchronize()
        finally:
            record = recorder.end()
        self._counted(record.own_launches)
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
            worst = max(worst, replay_difference(value, again, before.get(id(outputs[k]))))
        self.audits.append({"function": self.name, "call": number, "outputs": len(got),
                            "missing": missing, "worst_relative_difference": worst,
                            "own_launches": record.own_launches})
        return result


def replay_difference(value: np.ndarray, again: np.ndarray, before: np.ndarray | None
                       ) -> float:
    """The largest difference between a call's output and its replay, relative to the
    output's largest magnitude or, for an array the call changed in place (sgd_step's
    parameters), to the largest change it made: an update of a thousandth of the
    parameters that the kernels did not make must not hide under the parameters' size."""
    if not value.size:
        return 0.0
    diff = float(np.abs(again.astype(np.float64) - value).max())
    if not np.isfinite(diff):
        return np.inf
    scale = float(np.abs(value).max())
    if before is not None and before.shape == value.shape:
        change = float(np.abs(value.astype(np.float64) - before).max())
        if change > 0:
            scale = min(scale, change)
    return diff / max(scale, 1e-30)


def audited_functions(runner: Any, recorder: Any, full: set[int], audits: list, *,
                      clock: Any = None, labels_arg: int | None = None) -> dict[str, Audited]:
    """Replace the runner's (or engine's) forward, backward and sgd_step by Audited
    wrappers; returns them by name. Each step calls each once, so call k of every
    function belongs to step k and `full` audits whole steps."""
    wrapped = {name: Audited(name, getattr(runner, name), recorder, full, audits,
                             clock=clock, labels_arg=labels_arg if name == "backward" else None)
               for name in TRAINING_CALLS}
    for name, fn in wrapped.items():
        setattr(runner, name, fn)
    return wrapped


TRAINING_CALLS = ("forward", "backward", "sgd_step")


def audit_record(wrapped: dict[str, Audited], audits: list) -> dict:
    """What the grader reads of a training's audit (grader/checks/net_training.py)."""
    return {"audits": audits, "calls": {k: w.calls for k, w in wrapped.items()},
            "silent": {k: w.silent for k, w in wrapped.items()},
            "launches": {k: {str(n): c for n, c in sorted(w.launches.items())}
                         for k, w in wrapped.items()}}


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
    spec = job.data
    data = dataset.load(spec["source"], spec["val_fraction"], spec["seed"], spec["pool"],
                        spec["limit"])
    gemm = ctx.recorder.gemm_observer(make_gemm(trusted_gemm_name(ctx.on_gpu), submission))
    mark("data")
    for m, mode in enumerate(job.modes):
        try:
            config = TrainConfig(**{**mode, "hidden": tuple(mode["hidden"])})
            params = network.glorot_uniform(config.sizes(data.features), config.seed)
            runner = DeviceRunner(submission, params, config, gemm)
            audits: list[dict] = []
            full = {int(x) for x in job.audit_calls[m]}  # per mode, from the secret
            wrapped = audited_functions(runner, ctx.recorder, full, audits)
            history = train(runner, data, config, evaluate=False)
            ctx.snapshot.check()
            np.savez(out / f"train-{m}.npz", **runner.params().named())
            (out / f"train-{m}.json").write_text(json.dumps({
                "history": history.to_json(), **audit_record(wrapped, audits)}))
        except BaseException as err:  # noqa: BLE001
            save_error(out / f"train-{m}.err", err, submission)
        mark(f"train-{m}")



def run_speed(ctx: Context) -> None:
    """Time the student's training, every epoch, in the job's one mode: `speed.json`
    holds the seconds of each epoch and the audit of its calls, `speed.npz` the final
    parameters (the grader compares them with the reference, so that an epoch is only
    fast by doing its work), or `speed.err` the failure.

    The calls are audited as in the training job, so that a submission that can tell it
    is being timed gains nothing by behaving otherwise: every call's own launches are
    counted (the grader wants the pattern of the audited training, and no silent call),
    and the steps numbered in the job's `audit_calls`, drawn from the secret, are recorded
    in full and replayed. Their recording and replay are not timed: the epoch that holds
    them is timed without them and scaled to its number of steps."""
    from nnkit import dataset, network
    from nnkit.training import DeviceRunner, TrainConfig, make_gemm

    job, out, submission, clock = ctx.job, ctx.out, ctx.submission, ctx.clock
    spec = job.data
    try:
        data = dataset.load(spec["source"], spec["val_fraction"], spec["seed"], spec["pool"],
                            spec["limit"])
        config = TrainConfig(**{**job.mode, "hidden": tuple(job.mode["hidden"])})
        params = network.glorot_uniform(config.sizes(data.features), config.seed)
        gemm = ctx.recorder.gemm_observer(make_gemm(trusted_gemm_name(ctx.on_gpu), submission))
        runner = DeviceRunner(submission, params, config, gemm)
        n = len(data.train)
        slices = dataset.batch_slices(n, config.batch)
        # One untimed step of a throwaway copy compiles the kernels, so that every epoch
        # can be timed and the grader scores them all (a run that did its work in a few
        # epochs and nothing in the others gains nothing).
        spare = DeviceRunner(submission, network.glorot_uniform(config.sizes(data.features),
                                                                config.seed + 1),
                             config, gemm)
        first = slices[0]
        spare.step(data.train.images[first], data.train.labels[first])
        del spare
        audits: list[dict] = []
        full = {int(x) for x in job.audit_calls}
        wrapped = audited_functions(runner, ctx.recorder, full, audits, clock=clock)
        seconds = []

        def epoch_data(epoch: int) -> tuple:
            return runner.epoch_data(data.train.images, data.train.labels,
                                     dataset.epoch_order(n, config.seed, epoch))

        first_data = epoch_data(0)  # before the window: the first copies the set to the GPU
        # The GPU to this job, at its working clock, as Part 1's (grader/worker/window.py)
        window = ctx.extra["window"]
        with window.alone(launch_bound=ctx.on_gpu):
            for epoch in range(config.epochs):  # as nnkit.training.train, on the trusted clock
                X, labels = first_data if epoch == 0 else epoch_data(epoch)
                first_data = None
                window.fastest_cpu()
                step0 = epoch * len(slices)
                audited = sum(step0 <= c < step0 + len(slices) for c in full)
                paused = sum(w.paused for w in wrapped.values())
                clock.sync()
                start = clock.now()
                for s in slices:
                    runner.step(X[s], labels[s])
                runner.finish_epoch()
                clock.sync()
                elapsed = clock.now() - start
                elapsed -= sum(w.paused for w in wrapped.values()) - paused
                if 0 < audited < len(slices):  # the audited steps' share, at the others' pace
                    elapsed *= len(slices) / (len(slices) - audited)
                seconds.append(elapsed)
        ctx.snapshot.check()
        np.savez(out / "speed.npz", **runner.params().named())
        (out / "speed.json").write_text(json.dumps({"seconds": seconds,
                                                    **audit_record(wrapped, audits)}))
    except BaseException as err:  # noqa: BLE001
        save_error(out / "speed.err", err, submission)
