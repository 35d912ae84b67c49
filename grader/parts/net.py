"""Part 2: grading the network functions and GPU training against the CPU reference."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grader import safe_io
from grader.cases.gemm import derived, replayed_cases
from grader.cases.net import (
    BACKPROP_MODULE,
    FUNCTIONS,
    ITEMS,
    KERNELS_MODULE,
    job_inputs,
    unit_cases,
)
from grader.checks import anticheat, refusals
from grader.checks.net import AGREEMENT_TOL, check_unit, relative_norms
from grader.checks.net_training import (
    audit_problem,
    audit_problem_in,
    launch_pattern,
    load_params,
    pattern_problem,
)
from grader.isolation import gpus
from grader.isolation.runner import run_worker
from grader.parts.common import check_rows, failure_message, fresh_copy, graded_item
from grader.results import FAIL, NOT_GRADED, PARTIAL, PASS, ItemResult
from grader.safe_io import collapse_repeats
from grader.scoring import Config, speed_share
from grader.worker.jobs import NetJob
from nnkit import dataset, network
from nnkit.mnist import FILES, MnistFormatError, default_dir
from nnkit.submission import NAMED
from nnkit.training import ReferenceRunner, TrainConfig, train

ACCURACY_TOL = 0.005  # validation accuracy within 0.5 percentage points of the reference
# The reduced configuration validates on 9 images, where the reference itself is near
# chance: a broken training kept the points as often as not. Reported, not graded, there.
REDUCED_ACCURACY = ("not graded in the reduced configuration (no GPU or no MNIST): its 9 "
                    "validation images leave even the reference near chance; graded on a GPU "
                    "with MNIST (`make data`). net.agreement checks the training here")

# CME 213's grading modes: hidden 100, batch 800, lambda 1e-4; (learning rate, epochs).
MNIST_MODES = [(0.0005, 40), (0.001, 10), (0.002, 1)]
# The simulator's reduced configuration: 90 images of the shipped sample pooled to 7x7
# pixels (81 to train, 9 to validate), hidden 8, batch 20 (so the last batch of an epoch
# holds a single image), lambda 1e-3.
SIMULATOR_MODES = [(0.5, 2), (0.1, 1)]


@dataclass
class TrainingPlan:
    data: dict  # arguments of nnkit.dataset.load
    modes: list[dict]  # TrainConfig fields
    description: str


def _mnist_present() -> bool:
    return all((default_dir() / name).is_file() for name in FILES.values())


def training_plan(on_gpu: bool) -> TrainingPlan:
    if on_gpu and _mnist_present():
        # Absolute: the worker runs from the submission's working copy.
        data = {"source": str(default_dir().resolve()), "val_fraction": 0.1, "seed": 0, "pool": 1,
                "limit": None}
        modes = [{"hidden": [100], "batch": 800, "epochs": e, "lr": lr, "lam": 1e-4,
                  "loss": "ce", "seed": 0} for lr, e in MNIST_MODES]
        return TrainingPlan(data, modes, "MNIST, 784-100-10, batch 800, lambda 1e-4, "
                                         "rate/epochs 0.0005/40, 0.001/10, 0.002/1")
    data = {"source": dataset.SAMPLE, "val_fraction": 0.1, "seed": 0, "pool": 4, "limit": 90}
    modes = [{"hidden": [8], "batch": 20, "epochs": e, "lr": lr, "lam": 1e-3, "loss": "ce",
              "seed": 0} for lr, e in SIMULATOR_MODES]
    why = "no GPU" if not on_gpu else "MNIST not found (run `make data`)"
    return TrainingPlan(data, modes, f"reduced configuration ({why}): 81 sample images "
                                     "pooled to 7x7, 49-8-10, batch 20, lambda 1e-3, "
                                     "rate/epochs 0.5/2, 0.1/1")


@dataclass
class ReferenceTraining:
    plan: TrainingPlan
    data: dataset.Dataset
    params: list[network.Params]  # final float32 parameters per mode
    val_accuracy: list[float]


def train_reference(plan: TrainingPlan) -> ReferenceTraining:
    """The CPU reference from the same initial parameters and batches as the submissions
    get: the oracle of the agreement check.

    It runs in float32, like the GPU run, as in CME 213 (float on both sides). Against a
    float64 run, float32's own rounding of every update p - lr * g accumulates: after
    CME 213's 40 epochs (2,720 steps) the solution's W1 differed by 1.1e-4, relative
    max-norm, from float64 training (measured on an H200), over the 1e-4 criterion."""
    data = dataset.load(**plan.data)
    finals, accuracies = [], []
    for mode in plan.modes:
        config = TrainConfig(**{**mode, "hidden": tuple(mode["hidden"])})
        params = network.glorot_uniform(config.sizes(data.features), config.seed)
        runner = ReferenceRunner(params, config)
        train(runner, data, config, evaluate=False)
        finals.append(runner.params())
        accuracies.append(network.accuracy(finals[-1], data.val.images, data.val.labels))
    return ReferenceTraining(plan, data, finals, accuracies)


def _limit(config: Config, on_gpu: bool) -> float:
    return config.seconds_gpu if on_gpu else config.seconds_simulator


def grade_units(submission: Path, workroot: Path, config: Config,
                on_gpu: bool) -> list[ItemResult]:
    """One item per group of functions; an item passes when all its cases pass."""
    cases = unit_cases(on_gpu)
    workdir = workroot / "net_units"
    copy = fresh_copy(workdir, submission)
    replay = _replayed(cases, on_gpu, config)
    # The policy reads the copy before the job runs: the job may rewrite its own files.
    rules = {module: anticheat.policy_verdict(copy, module, "net", config.policy)
             for module in (KERNELS_MODULE, BACKPROP_MODULE)}
    run = run_worker(NetJob(kind="net_units", submission=str(copy), cases=cases,
                            replay=replay), workdir, _limit(config, on_gpu), on_gpu,
                     inputs=job_inputs(cases, config.secret, replay))
    stopped = run.stop_reason(_limit(config, on_gpu))
    outcomes = [check_unit(c, run.outdir, n, stopped, config.findings_fail, config.secret,
                           n in replay)
                for n, c in enumerate(cases)]
    stopped_by_guard = refusals.stop_message(run.outdir)
    items = []
    for item_id in ITEMS:
        mine = [o for o in outcomes if FUNCTIONS[o.function][1] == item_id]
        collapse_repeats(mine)  # an error text once per item, not once per case
        failures = [o for o in mine if not o.passed]
        verdict = rules[BACKPROP_MODULE if item_id in BACKPROP_ITEMS else KERNELS_MODULE]
        problem = stopped_by_guard or verdict.failure
        ok = not failures and not problem
        message = problem or (f"all {len(mine)} cases within tolerance" if ok else
                              failure_message(failures, len(mine)))
        if verdict.note:
            message += "; " + verdict.note
        items.append(graded_item(item_id, config, mine, message, problem,
                                 checks=check_rows(mine),
                                 figures={"worker_seconds": round(run.seconds, 2)}))
    return items


def _replayed(cases: list[dict], on_gpu: bool, config: Config) -> list[int]:
    """Unit cases whose launches are replayed: on a GPU all; in the simulator, per
    function, the number replayed_cases() picks from a seed no job sees."""
    chosen = []
    for name in FUNCTIONS:
        mine = [n for n, c in enumerate(cases) if c["function"] == name]
        picks = replayed_cases(len(mine), on_gpu, derived(config.secret, "net", name))
        chosen += [mine[i] for i in picks]
    return sorted(chosen)


# Items whose functions live in net_2_backprop.py (the policy is checked per module).
BACKPROP_ITEMS = ("net.sgd", "net.forward", "net.backward")
AUDITED_CALLS = 4  # training calls of each function recorded in full and replayed, per mode


def grade_training(submission: Path, workroot: Path, config: Config, on_gpu: bool,
                   reference: ReferenceTraining,
                   speed: dict[str, float] | None = None) -> list[ItemResult]:
    """Agreement of the trained parameters with the reference, validation accuracy and,
    on a GPU, the speed against the solution's seconds per epoch (`speed`: per GPU id,
    measure_speed_reference)."""
    plan = reference.plan
    workdir = workroot / "net_train"
    copy = fresh_copy(workdir, submission)
    # The policy reads the copy before the job runs: the job may rewrite its own files.
    rules = anticheat.policy_verdict(copy, BACKPROP_MODULE, "net", config.policy)
    run = run_worker(NetJob(kind="net_train", submission=str(copy), data=plan.data,
                            modes=plan.modes,
                            audit_calls=training_audits(reference, config.secret)),
                     workdir, _limit(config, on_gpu), on_gpu)
    stopped_by_guard = refusals.stop_message(run.outdir)
    stopped = stopped_by_guard or run.stop_reason(_limit(config, on_gpu))
    agree_checks, acc_checks = [], []
    integrity: str | None = None
    figures: dict = {"relative_max_norm": {}, "relative_l2_norm": {},
                     "tolerance": AGREEMENT_TOL, "configuration": plan.description}
    for m, (mode, ref_params, ref_acc) in enumerate(
            zip(plan.modes, reference.params, reference.val_accuracy, strict=True)):
        name = f"rate {mode['lr']:g}, {mode['epochs']} epoch(s)"
        got, problem = load_params(run.outdir, m, ref_params, stopped)
        unaudited = None if problem else audit_problem_in(run.outdir, m)
        problem = rules.failure or stopped_by_guard or problem or unaudited
        if problem:
            if rules.failure or stopped_by_guard or unaudited:
                # A rule broken in any mode (the policy, the guard, the audit of the
                # calls) zeroes both items: partial credit is never earned beside it.
                integrity = integrity or problem
            agree_checks.append({"case": name, "passed": False, "message": problem})
            acc_checks.append({"case": name, "passed": False, "message": problem})
            continue
        worst, parts = 0.0, []
        for key, ref in ref_params.named().items():
            rel_max, rel_l2 = relative_norms(got[key], ref)
            figures["relative_max_norm"][f"{key} ({name})"] = rel_max
            figures["relative_l2_norm"][f"{key} ({name})"] = rel_l2
            worst = max(worst, rel_max)
            parts.append(f"{key} {rel_max:.1e}/{rel_l2:.1e}")
        ok = worst <= AGREEMENT_TOL
        agree_checks.append({"case": name, "passed": ok, "worst_relative_max_norm": worst,
                             "message": "relative max-norm/L2 of the difference: "
                                        + ", ".join(parts)})
        acc = network.accuracy(network.Params.from_named(got),
                               reference.data.val.images.astype(np.float32),
                               reference.data.val.labels)
        acc_ok = abs(acc - ref_acc) <= ACCURACY_TOL + 1e-12
        acc_checks.append({"case": name, "passed": acc_ok, "validation_accuracy": acc,
                           "reference_accuracy": ref_acc,
                           "message": f"validation accuracy {acc:.2%}, reference {ref_acc:.2%}"})
    accuracy = _training_item("net.accuracy", config, acc_checks, {}, plan.description,
                              integrity)
    if plan.data["source"] == dataset.SAMPLE:
        accuracy = ItemResult("net.accuracy", config.title("net.accuracy"),
                              config.points("net.accuracy"), None, NOT_GRADED,
                              REDUCED_ACCURACY, checks=acc_checks)
    agreement = _training_item("net.agreement", config, agree_checks, figures,
                               plan.description, integrity)
    try:
        audited = launch_pattern(safe_io.read_json(run.outdir / f"train-{SPEED_MODE}.json",
                                                   4 << 20))
    except (OSError, ValueError):
        audited = None
    return [agreement, accuracy,
            speed_item(submission, workroot, config, on_gpu, reference, agreement,
                       gpus.for_current(speed), audited or {})]


def _epoch_steps(reference: ReferenceTraining, mode: dict) -> int:
    """Minibatch steps of one epoch of `mode` on the reference's training rows."""
    train, plan = getattr(reference.data, "train", None), reference.plan
    rows = len(train) if train is not None else int(
        (plan.data.get("limit") or 54000) * (1 - plan.data.get("val_fraction", 0.1)))
    return max(1, -(-rows // mode["batch"]))


def training_audits(reference: ReferenceTraining, secret: int) -> list[list[int]]:
    """Per training mode, the calls of each function recorded in full and replayed: the
    first, the last (a network that puts right parameters in place at the end of a wrong
    training is caught there) and others drawn from the secret over the whole mode."""
    audits = []
    for m, mode in enumerate(reference.plan.modes):
        steps = _epoch_steps(reference, mode) * mode["epochs"]
        rng = np.random.default_rng(derived(secret, "net", "audit", m))
        drawn = rng.integers(0, steps, AUDITED_CALLS - 2)
        audits.append(sorted({0, steps - 1, *(int(x) for x in drawn)}))
    return audits


def _training_item(item_id: str, config: Config, checks: list[dict], figures: dict,
                   description: str, integrity: str | None = None) -> ItemResult:
    failures = [c for c in checks if not c["passed"]]
    ok = not failures
    message = (f"all {len(checks)} modes agree ({description})" if ok else
               failure_message(failures, len(checks), "modes"))
    return graded_item(item_id, config, checks, message, integrity, checks=checks,
                       figures=figures)


# Part 2's speed: the mode of MNIST_MODES whose training is timed (rate 0.001, 10 epochs of
# 784-100-10, batch 800). As Part 1 times a kernel, each epoch is timed on the worker's
# trusted clock and the fastest counts (noise only adds time; the first epoch also
# compiles the kernels); the solution is timed the same way on the same GPU in the same
# run. The timed run's final parameters must agree with the reference's for that mode.
SPEED_MODE = 1
NO_GPU = "not graded (no GPU): performance is graded on a GPU only"
NO_MNIST = ("not graded: the network's speed is timed on MNIST only, which this machine "
            "lacks (`make data`)")


@dataclass
class SpeedRun:
    seconds: float | None  # the mean epoch; None when the run proves nothing
    message: str
    epochs: list[float]
    launches: dict | None = None  # the timed calls' launch pattern (launch_pattern)


def speed_audit_steps(reference: ReferenceTraining, secret: int) -> list[int]:
    """The timed run's steps recorded in full and replayed: the last and others drawn
    from the secret (the same for the solution and the submissions of a run), at most
    AUDITED_CALLS and fewer than an epoch's steps, so that no epoch is left without a
    timed step."""
    mode = reference.plan.modes[SPEED_MODE]
    per_epoch = _epoch_steps(reference, mode)
    total = per_epoch * mode["epochs"]
    count = min(AUDITED_CALLS, max(per_epoch - 1, 1), total)
    rng = np.random.default_rng(derived(secret, "net", "speed-audit"))
    drawn = rng.choice(max(total - 1, 1), count - 1, replace=False) if count > 1 else []
    return sorted({total - 1, *(int(x) for x in drawn)})  # the last step, and others


def time_training(copy: Path, workdir: Path, config: Config, reference: ReferenceTraining,
                  on_gpu: bool = True, audited: dict | None = None) -> SpeedRun:
    """The network in `copy` trained in the speed mode by a worker, timed per epoch (on a
    GPU for grading; in the simulator only to test the job). Its calls are audited as
    the training job's; `audited`: the launch pattern of the submission's audited
    training of the same mode (launch_pattern), which the timed run must repeat, or None
    (the solution, timed as the yardstick)."""
    plan = reference.plan
    limit = _limit(config, on_gpu)
    # The GPU to itself for its timed epochs (one timing window), as Part 1's kernels.
    run = run_worker(NetJob(kind="net_speed", submission=str(copy), data=plan.data,
                            mode=plan.modes[SPEED_MODE],
                            audit_calls=speed_audit_steps(reference, config.secret)),
                     workdir, limit, on_gpu, windows=1)
    stopped = refusals.stop_message(run.outdir) or run.stop_reason(limit)
    ref_params = reference.params[SPEED_MODE]
    got, problem = load_params(run.outdir, "speed", ref_params, stopped)
    if problem:
        return SpeedRun(None, f"the timed training: {problem}", [])
    worst = max(relative_norms(got[k], ref)[0] for k, ref in ref_params.named().items())
    if not worst <= AGREEMENT_TOL:
        return SpeedRun(None, f"the timed training does not agree with the reference "
                              f"(relative max-norm {worst:.1e} > {AGREEMENT_TOL:g})", [])
    try:
        raw = safe_io.read_json(run.outdir / "speed.json", 1 << 20)
        epochs = [float(x) for x in raw["seconds"]]
    except (OSError, ValueError, KeyError, TypeError):
        return SpeedRun(None, "the timed training left no readable epoch times", [])
    unaudited = audit_problem(raw) or pattern_problem(launch_pattern(raw), audited)
    if unaudited:
        return SpeedRun(None, f"the timed training: {unaudited}", [])
    if len(epochs) != plan.modes[SPEED_MODE]["epochs"] or not all(
            np.isfinite(t) and t > 0 for t in epochs):
        return SpeedRun(None, f"the timed training's epoch times are not valid: {epochs[:20]}",
                        [])
    return SpeedRun(sum(epochs) / len(epochs), "", epochs,  # all of them: see run_speed
                    launch_pattern(raw))


def measure_speed_reference(config: Config, workroot: Path,
                            reference: ReferenceTraining) -> float:
    """The solution's mean epoch on this GPU (the speed item's yardstick), each round
    in a fresh worker like a submission's. As Part 1's references (gemm.measure_reference),
    a first round is thrown away: it meets a GPU not yet at its clocks."""
    for round_ in ("warm-up", "timed"):
        workdir = workroot / "reference" / f"net_speed-{round_}"
        timed = time_training(fresh_copy(workdir, NAMED["solution"]), workdir, config,
                              reference)
        if timed.seconds is None:
            raise RuntimeError(f"reference network speed: {timed.message}")
    return timed.seconds


def speed_item(submission: Path, workroot: Path, config: Config, on_gpu: bool,
               reference: ReferenceTraining, agreement: ItemResult,
               solution_seconds: float | None, audited: dict | None = None) -> ItemResult:
    """net.performance: the mean epoch over the solution's, as Part 1's speed items
    score a kernel (speed_share of the ratio); timed only once the network agrees.
    audited: the launch pattern of the submission's audited training of the speed mode
    ({} when there is none, which no timed run matches)."""
    item_id = "net.performance"
    title, max_points = config.title(item_id), config.points(item_id)
    if not on_gpu:
        return ItemResult(item_id, title, max_points, None, NOT_GRADED, NO_GPU)
    if reference.plan.data["source"] == dataset.SAMPLE:
        return ItemResult(item_id, title, max_points, None, NOT_GRADED, NO_MNIST)
    if solution_seconds is None:
        return ItemResult(item_id, title, max_points, None, NOT_GRADED,
                          "not graded: the solution's network was not timed in this run")
    if agreement.status != PASS:
        return ItemResult(item_id, title, max_points, 0.0, FAIL,
                          "not timed: the network must pass net.agreement first")
    workdir = workroot / "net_speed"
    timed = time_training(fresh_copy(workdir, submission), workdir, config, reference,
                          audited=audited if audited is not None else {})
    if timed.seconds is None:
        return ItemResult(item_id, title, max_points, 0.0, FAIL, timed.message)
    ratio = timed.seconds / solution_seconds
    share = speed_share(ratio, config.net_full_at, config.zero_at)
    status = PASS if share == 1.0 else (FAIL if share == 0.0 else PARTIAL)
    mode = reference.plan.modes[SPEED_MODE]
    sizes = [reference.data.features, *mode["hidden"], 10]
    case = f"MNIST {'-'.join(map(str, sizes))}, batch {mode['batch']}, {mode['epochs']} epochs"
    checks = [{"case": case, "seconds": timed.seconds, "solution_seconds": solution_seconds,
               "time_over_solution": ratio, "epoch_seconds": timed.epochs}]
    message = (f"seconds per epoch / the solution's = {ratio:.2f} (the mean of "
               f"{len(timed.epochs)} epochs each): {share:.0%} of the points")
    return ItemResult(item_id, title, max_points, round(share * max_points, 2), status,
                      message, checks=checks,
                      figures={"time_over_solution": ratio})


def reference_or_error(on_gpu: bool) -> ReferenceTraining:
    try:
        return train_reference(training_plan(on_gpu))
    except MnistFormatError as err:
        raise RuntimeError(f"cannot train the reference: {err}") from None
