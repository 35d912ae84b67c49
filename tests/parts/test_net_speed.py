"""Part 2's speed item, net.performance: the student's fastest training epoch over the
solution's, timed on the same GPU in the same run and scored as Part 1's speed items;
not graded without a GPU, with Part 1's words."""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from grader import pipeline
from grader.isolation.runner import WorkerRun
from grader.parts import gemm as gemm_part
from grader.parts import net as net_part
from grader.results import FAIL, NOT_GRADED, PARTIAL, PASS, ItemResult
from grader.scoring import load_config, speed_share
from nnkit import network
from nnkit.submission import NAMED
from tests.conftest import run_kit

CONFIG = load_config()
ITEM = "net.performance"
SIZES = [12, 5, 10]  # a small network stands in for MNIST's 784-100-10 below


def _reference(source: str = "/data/mnist") -> net_part.ReferenceTraining:
    modes = [{"hidden": [5], "batch": 4, "epochs": e, "lr": 0.1, "lam": 0.0, "loss": "ce",
              "seed": 0} for e in (3, 10, 1)]
    plan = net_part.TrainingPlan({"source": source, "limit": 12, "val_fraction": 0.0},
                                 modes, "a stand-in")
    params = [network.glorot_uniform(SIZES, seed) for seed in range(3)]
    return net_part.ReferenceTraining(plan, SimpleNamespace(features=SIZES[0]), params,
                                      [0.9] * 3)


def _agreement(status: str = PASS) -> ItemResult:
    return ItemResult("net.agreement", "agreement", 10, 10 if status == PASS else 0, status, "")


def _item(tmp_path, on_gpu=True, reference=None, agreement=None, seconds=1.0):
    (tmp_path / "sub").mkdir(exist_ok=True)  # the submission the speed job copies
    return net_part.speed_item(tmp_path / "sub", tmp_path, CONFIG, on_gpu,
                               reference or _reference(), agreement or _agreement(), seconds)


def test_without_a_gpu_it_is_not_graded_in_part_1s_words(tmp_path):
    item = _item(tmp_path, on_gpu=False)
    part1 = gemm_part.performance_item("naive", True, None, [], CONFIG, None)
    assert (item.points, item.status) == (None, NOT_GRADED)
    assert item.message == part1.message == net_part.NO_GPU
    assert item.max_points == CONFIG.points(ITEM) > 0


def test_the_training_task_decides_it_and_a_missing_submission_leaves_it_ungraded(tmp_path):
    refs = {"gemm": None, "net": None, "net_speed": None, "mpi": None}
    tasks = pipeline.tasks(["net"], [], tmp_path, tmp_path, CONFIG, False, refs)
    training = next(t for t in tasks if t.name == "net training")
    assert ITEM in training.item_ids
    item = pipeline.nothing_to_grade(ITEM, CONFIG, False, "no such folder")
    assert (item.points, item.status) == (None, NOT_GRADED)


def test_without_mnist_or_a_timed_solution_it_is_not_graded(tmp_path):
    from nnkit import dataset

    item = _item(tmp_path, reference=_reference(dataset.SAMPLE))
    assert (item.points, item.status, item.message) == (None, NOT_GRADED, net_part.NO_MNIST)
    assert _item(tmp_path, seconds=None).status == NOT_GRADED


def test_a_network_that_does_not_agree_is_not_timed(tmp_path, monkeypatch):
    monkeypatch.setattr(net_part, "time_training", lambda *a, **k: pytest.fail("timed"))
    item = _item(tmp_path, agreement=_agreement(FAIL))
    assert (item.points, item.status) == (0.0, FAIL)
    assert "must pass net.agreement first" in item.message


@pytest.mark.parametrize("seconds, status", [(1.9, PASS), (2.5, PARTIAL), (12.0, FAIL)])
def test_the_ratio_is_scored_as_part_1s_speed(tmp_path, monkeypatch, seconds, status):
    monkeypatch.setattr(net_part, "time_training",
                        lambda *a, **k: net_part.SpeedRun(seconds, "", [seconds + 1, seconds]))
    item = _item(tmp_path, seconds=1.0)
    share = speed_share(seconds, CONFIG.net_full_at, CONFIG.zero_at)
    assert item.points == round(share * CONFIG.points(ITEM), 2) and item.status == status
    assert item.figures["time_over_solution"] == pytest.approx(seconds)
    assert item.checks[0]["solution_seconds"] == 1.0
    assert item.checks[0]["case"] == "MNIST 12-5-10, batch 4, 10 epochs"
    assert f"= {seconds:.2f} (the mean of 2 epochs each)" in item.message


# The launch pattern of an honest run of the stand-in's 10 epochs (3 steps each).
PATTERN = {"forward": {"4": 30}, "backward": {"9": 30}, "sgd_step": {"2": 30}}
AUDIT = {"audits": [{"function": "forward", "call": 4, "outputs": 3, "missing": 0,
                     "worst_relative_difference": 0.0, "own_launches": 4}],
         "silent": {"forward": 0, "backward": 0, "sgd_step": 0}, "launches": PATTERN}


def _fake_worker(params: dict | None, seconds: list | None, audit: dict | None = None):
    """run_worker's stand-in: the files a speed job leaves."""
    def run(job, workdir, timeout, on_gpu, **kw):
        assert job.kind == "net_speed" and job.mode["epochs"] == 10
        # Steps drawn from the secret, fewer than an epoch's 3 (12 rows in batches of 4).
        assert len(job.audit_calls) == 2 and all(0 <= c < 30 for c in job.audit_calls)
        out = workdir / "out"
        shutil.rmtree(out, ignore_errors=True)  # as each real job's folder is fresh
        out.mkdir(parents=True)
        if params is not None:
            np.savez(out / "speed.npz", **params)
        if seconds is not None:
            (out / "speed.json").write_text(json.dumps({"seconds": seconds,
                                                        **(audit or AUDIT)}))
        return WorkerRun(out, 0, False, "", "fake", 1.0)
    return run


def test_the_timed_run_must_agree_and_report_every_epoch(tmp_path, monkeypatch):
    reference = _reference()
    good = reference.params[net_part.SPEED_MODE].named()
    epochs = [0.5 + 0.01 * n for n in range(10)]

    def timed(params, seconds):
        monkeypatch.setattr(net_part, "run_worker", _fake_worker(params, seconds))
        return net_part.time_training(tmp_path, tmp_path / "w", CONFIG, reference)

    run = timed(good, epochs)
    # Every epoch counts (their mean): work put off to a few epochs is timed too.
    assert run.seconds == pytest.approx(sum(epochs) / 10) and run.epochs == epochs
    lopsided = [0.001] * 9 + [5.0]
    assert timed(good, lopsided).seconds == pytest.approx(sum(lopsided) / 10)
    # An epoch only counts when it did the work: parameters off the reference fail it.
    wrong = {k: v * np.float32(1.01) if k == "W1" else v for k, v in good.items()}
    run = timed(wrong, epochs)
    assert run.seconds is None and "does not agree with the reference" in run.message
    assert timed(good, epochs[:9]).seconds is None  # an epoch missing
    assert timed(good, [*epochs[:9], -1.0]).seconds is None  # a clock that ran backwards
    assert "no readable epoch times" in timed(good, None).message
    run = timed(None, None)
    assert run.seconds is None and "no parameters" in run.message


def test_the_timed_run_is_audited_as_the_training_and_must_launch_as_it_did(tmp_path,
                                                                           monkeypatch):
    """A network that can tell it is being timed gains nothing by working otherwise:
    the timed calls must launch the submission's kernels as the audited training of the
    same mode did, and its steps drawn from the secret must replay."""
    reference = _reference()
    good = reference.params[net_part.SPEED_MODE].named()
    epochs = [0.5] * 10

    def timed(audit, audited=PATTERN):
        monkeypatch.setattr(net_part, "run_worker", _fake_worker(good, epochs, audit))
        return net_part.time_training(tmp_path, tmp_path / "w", CONFIG, reference,
                                      audited=audited)

    assert timed(AUDIT).seconds == pytest.approx(0.5)
    assert timed(AUDIT, audited=None).seconds == pytest.approx(0.5)  # the solution's run
    silent = {**AUDIT, "silent": {"forward": 0, "backward": 30, "sgd_step": 0}}
    run = timed(silent)
    assert run.seconds is None and "30 call(s) of backward() launched none" in run.message
    fewer = {**AUDIT, "launches": {**PATTERN, "backward": {"7": 30}}}
    run = timed(fewer)
    assert run.seconds is None and "backward(): 30 call(s) launching 7 when timed" in run.message
    assert "30 call(s) launching 9 when audited" in run.message
    # A shape's first use may launch once more (a workspace filled): a call or two apart
    # is allowed, more is not.
    once = {**AUDIT, "launches": {**PATTERN, "forward": {"4": 28, "5": 2}}}
    assert timed(once).seconds == pytest.approx(0.5)
    some = {**AUDIT, "launches": {**PATTERN, "forward": {"4": 27, "1": 3}}}
    assert "otherwise than the audited" in timed(some).message
    assert "otherwise than the audited" in timed(AUDIT, audited={}).message
    replay = {**AUDIT, "audits": [{**AUDIT["audits"][0], "worst_relative_difference": 0.5}]}
    run = timed(replay)
    assert run.seconds is None and "call 4 of forward()" in run.message
    assert "no training call was recorded" in timed({**AUDIT, "audits": []}).message
    assert "no record" in timed({"audits": "x"}).message


@pytest.mark.slow
def test_the_speed_job_runs_the_students_network_in_the_simulator(tmp_path):
    """The worker's side, in the reduced configuration: every epoch timed, and the final
    parameters those of the CPU reference (on a GPU the same job runs on MNIST)."""
    reference = net_part.train_reference(net_part.training_plan(False))
    copy = net_part.fresh_copy(tmp_path / "w", NAMED["solution"])  # as the grader does
    run = net_part.time_training(copy, tmp_path / "w", CONFIG, reference, on_gpu=False)
    epochs = reference.plan.modes[net_part.SPEED_MODE]["epochs"]
    assert run.seconds is not None, run.message
    assert len(run.epochs) == epochs and run.seconds == min(run.epochs) > 0
    starter = net_part.fresh_copy(tmp_path / "w2", NAMED["starter"])
    run = net_part.time_training(starter, tmp_path / "w2", CONFIG, reference, on_gpu=False)
    assert run.seconds is None and "NotImplementedError" in run.message


def _slowed_solution(dest: Path) -> Path:
    """The solution with each forward product computed 32 times over (the same result:
    beta = 0): a network that agrees, more slowly."""
    shutil.copytree(NAMED["solution"], dest)
    path = dest / "net_2_backprop.py"
    old = "        gemm(acts[-1], W, Z, 1.0, 0.0, trans_b=True)\n"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, "        for _ in range(32):\n    " + old))
    return dest


@pytest.mark.gpu
def test_on_a_gpu_the_solution_earns_the_speed_points_and_a_slower_network_less(tmp_path):
    from nnkit.mnist import FILES, default_dir

    if not all((default_dir() / name).is_file() for name in FILES.values()):
        pytest.skip("MNIST is not in place (make data): the speed is timed on MNIST only")
    slow = _slowed_solution(tmp_path / "slow_forward")
    out = tmp_path / "out"
    result = run_kit("grader", "solution", str(slow), "starter", "--parts", "net",
                     "--seed", "11", "--out", str(out), timeout=450)
    assert result.returncode == 0, result.stderr[-3000:]

    def speed(name):
        data = json.loads((out / f"{name}.json").read_text())
        return next(i for i in data["items"] if i["id"] == ITEM)

    solution, slowed, starter = speed("solution"), speed("slow_forward"), speed("starter")
    print(json.dumps({n: {k: i[k] for k in ("points", "status", "message", "checks")}
                      for n, i in (("solution", solution), ("slow_forward", slowed))},
                     indent=1))
    assert solution["points"] == solution["max_points"] > 0, solution["message"]
    ratio = slowed["figures"]["time_over_solution"]
    assert ratio > 1.3, slowed["message"]
    assert slowed["points"] == round(speed_share(ratio, CONFIG.net_full_at, CONFIG.zero_at)
                                     * slowed["max_points"], 2) < slowed["max_points"]
    assert starter["points"] == 0 and "not timed" in starter["message"]


@pytest.mark.gpu
def test_on_a_gpu_a_network_that_knows_it_is_timed_gains_nothing(tmp_path):
    """The timed job on MNIST: the solution's run passes its own audit and launch pattern;
    tests/cheats_net/detect_timing (honest while audited, host work when it believes it
    is timed) launches as many kernels per call, and the replay of its recorded steps
    shows the host work. Prints the epochs, to compare with an unaudited run's."""
    from nnkit.mnist import FILES, default_dir

    if not all((default_dir() / name).is_file() for name in FILES.values()):
        pytest.skip("MNIST is not in place (make data): the speed is timed on MNIST only")
    reference = net_part.train_reference(net_part.training_plan(True))
    cheat = shutil.copytree(NAMED["solution"], tmp_path / "subs" / "detect_timing")
    for path in (Path(__file__).parents[1] / "cheats_net" / "detect_timing").iterdir():
        shutil.copy(path, cheat / path.name)
    runs = {}
    for name, source, audited in (("solution", NAMED["solution"], None),
                                  ("solution again", NAMED["solution"], "solution"),
                                  ("detect_timing", cheat, "solution")):
        work = tmp_path / name.replace(" ", "_")
        pattern = runs[audited].launches if audited else None
        runs[name] = net_part.time_training(net_part.fresh_copy(work, source), work, CONFIG,
                                            reference, audited=pattern)
        print(name, runs[name].seconds, runs[name].epochs, runs[name].message[:300])
    assert runs["solution"].seconds is not None, runs["solution"].message
    assert runs["solution again"].seconds is not None, runs["solution again"].message
    caught = runs["detect_timing"]
    assert caught.seconds is None
    assert "not what the kernels the call launched compute" in caught.message


def test_the_student_kit_says_why_the_networks_speed_is_not_graded(tmp_path):
    """Without solution/ (the student kit) nothing times the solution's network: on a GPU
    the item says where to time one's own, and the run goes on."""
    from grader.selection import NO_SOLUTION_NET, Selection

    kit = Selection(solution=False)
    item = kit.keep([_item(tmp_path, seconds=None)], on_gpu=True)[0]
    assert (item.points, item.message) == (None, NO_SOLUTION_NET)
    no_gpu = kit.keep([_item(tmp_path, on_gpu=False, seconds=None)], on_gpu=False)[0]
    assert no_gpu.message == net_part.NO_GPU
