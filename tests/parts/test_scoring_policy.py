"""The grading policy: per-item credit (all-or-nothing or partial) in the config, the rule
that a broken rule zeroes an item whatever its cases gave, and the default points as the
original assignment's weights."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from grader import examples
from grader.checks.gemm import (
    NO_KERNEL,
    NOT_REPRODUCED,
    NOT_REPRODUCED_ON_NEW,
    OTHER_KERNELS,
)
from grader.parts.common import graded_item, integrity_failure
from grader.results import FAIL, PARTIAL, PASS, CaseOutcome
from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config, partial_points
from tests.conftest import KIT_ROOT, run_kit

ITEM = "net.backward"


def _config(credit: str = "partial"):
    config = load_config()
    items = {**config.items, ITEM: {**config.items[ITEM], "credit": credit}}
    return replace(config, items=items)


def _cases(passed: int, failed: int, why: str = "3 of 85 elements wrong") -> list[CaseOutcome]:
    return ([CaseOutcome(f"ok {n}", True, "within the bound") for n in range(passed)]
            + [CaseOutcome(f"bad {n}", False, why) for n in range(failed)])


def _write(tmp_path: Path, old: str, new: str) -> Path:
    text = DEFAULT_CONFIG.read_text()
    assert old in text
    path = tmp_path / "config.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_partial_points_round_to_hundredths():
    assert partial_points(10, 3, 4) == 7.5
    assert partial_points(5, 1, 3) == 1.67  # 1.666... to the documented 2 decimals
    assert partial_points(10, 0, 4) == 0.0 and partial_points(10, 4, 4) == 10.0
    assert partial_points(10, 0, 0) == 0.0  # an item with no case earns nothing


def test_partial_credit_counts_passed_cases_and_says_so():
    config = _config("partial")
    points = config.points(ITEM)
    item = graded_item(ITEM, config, _cases(3, 1), "1 of 4 cases fail; first: bad 0")
    assert item.points == partial_points(points, 3, 4) and item.status == PARTIAL
    assert item.message.startswith(f"3 of 4 cases: {points * 0.75:g} / {points:g}; 1 of 4")
    full = graded_item(ITEM, config, _cases(4, 0), "all 4 cases within tolerance")
    assert (full.points, full.status) == (points, PASS)
    assert full.message == "all 4 cases within tolerance"
    none = graded_item(ITEM, config, _cases(0, 4), "4 of 4 cases fail")
    assert (none.points, none.status) == (0.0, FAIL)


def test_check_rows_count_like_outcomes():
    rows = [{"case": "a", "passed": True, "message": ""},
            {"case": "b", "passed": False, "message": "differs by 2e-3"}]
    item = graded_item(ITEM, _config("partial"), rows, "1 of 2 modes fail")
    assert item.points == partial_points(_config().points(ITEM), 1, 2)


def test_all_or_nothing_is_the_default():
    config = load_config()
    assert all(config.credit(i) == "all" for i in config.items)
    item = graded_item(ITEM, config, _cases(3, 1), "1 of 4 cases fail")
    assert (item.points, item.status) == (0.0, FAIL)


@pytest.mark.parametrize("why", [
    NO_KERNEL,
    NOT_REPRODUCED.format(why="85 of 85 elements wrong"),
    NOT_REPRODUCED_ON_NEW.format(why="85 of 85 elements wrong"),
    OTHER_KERNELS,
    "modified its input A",
    "returned the previous call's result for new operands in the same buffers",
    "rank 1 called comm.Allreduce: the ring must use point-to-point messages only",
])
def test_a_case_that_breaks_the_rules_zeroes_a_partial_item(why):
    assert integrity_failure(why)
    item = graded_item(ITEM, _config("partial"), _cases(9, 1, why), "1 of 10 cases fail")
    assert (item.points, item.status) == (0.0, FAIL)


def test_an_item_level_verdict_zeroes_a_partial_item():
    """The policy's, the guard's or the library scan's verdict reaches the item as
    `problem`: every case may have passed, the item still earns nothing."""
    verdict = "uses a library matrix product where the GEMM must be hand-written: np.dot"
    item = graded_item(ITEM, _config("partial"), _cases(4, 0), verdict, verdict)
    assert (item.points, item.status, item.message) == (0.0, FAIL, verdict)


def test_a_wrong_value_is_no_integrity_failure():
    assert not integrity_failure("3 of 85 elements outside the float32 bound")
    assert not integrity_failure("raised ValueError: shapes do not match")


def test_unknown_credit_is_a_clear_config_error(tmp_path):
    path = _write(tmp_path, '[items."net.sgd"]\n', '[items."net.sgd"]\ncredit = "some"\n')
    with pytest.raises(ConfigError, match=r'net.sgd.*credit = .some.: expected "all" or '
                                          r'"partial"'):
        load_config(path)


def test_partial_credit_is_read_from_the_config(tmp_path):
    path = _write(tmp_path, '[items."net.sgd"]\n', '[items."net.sgd"]\ncredit = "partial"\n')
    config = load_config(path)
    assert config.credit("net.sgd") == "partial" and config.credit("net.forward") == "all"


def test_manual_items_take_no_credit_rule_and_no_graded_id(tmp_path):
    path = _write(tmp_path, '[manual."report.quality"]\n',
                  '[manual."report.quality"]\ncredit = "partial"\n')
    with pytest.raises(ConfigError, match="report.quality.*remove credit"):
        load_config(path)
    path = _write(tmp_path, '[manual."report.quality"]\n', '[manual."net.sgd"]\n')
    with pytest.raises(ConfigError, match="net.sgd: both an .items. and a .manual. item"):
        load_config(path)
    path = _write(tmp_path, "points = 10\n\n[manual.", 'points = "ten"\n\n[manual.')
    with pytest.raises(ConfigError, match="needs points >= 0"):
        load_config(path)


def test_default_points_are_the_assignments_weights():
    """2 points per percent: correctness 47%, speed 20%, the reports 33% (Part I of the
    assignment, section 1); the bonus outside the total."""
    config = load_config()
    graded = [i for i in config.items if "hierarchical" not in i]
    speed = sum(config.points(i) for i in graded if i.endswith(".performance"))
    correctness = sum(config.points(i) for i in graded if not i.endswith(".performance"))
    reports = {i: config.points(i) for i in config.manual}
    assert (correctness, speed, sum(reports.values())) == (2 * 47, 2 * 20, 2 * 33)
    assert reports == {"report.profiling_preliminary": 2 * 5,
                       "report.correctness_analysis": 2 * 3,
                       "report.profiling_final": 2 * 20, "report.quality": 2 * 5}
    assert not config.bonus


@pytest.mark.slow
def test_partial_credit_in_a_grading_run(tmp_path):
    """The simulator grades Part 1's naive kernel with partial credit: a kernel wrong on
    the cases with beta != alpha earns its share; a cheat whose host-computed results
    pass every case the grader does not replay earns nothing, as all-or-nothing gives it;
    the solution earns everything."""
    config = _write(tmp_path, '[items."gemm.naive.correctness"]\n',
                    '[items."gemm.naive.correctness"]\ncredit = "partial"\n')
    spec = next(s for s in examples.all_specs() if s.name == "naive_beta_ignored")
    buggy = examples.materialize(spec, tmp_path / "subs")
    cheat = shutil.copytree(KIT_ROOT / "tests" / "cheats" / "dummy_kernel",
                            tmp_path / "subs" / "dummy_kernel")
    out = tmp_path / "out"
    result = run_kit("grader", str(buggy), str(cheat), "solution", "--parts", "gemm",
                     "--kernels", "naive", "--config", str(config), "--seed", "5",
                     "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    reports = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}

    def item(name):
        return next(i for i in reports[name]["items"] if i["id"] == "gemm.naive.correctness")

    bug, dummy, solution = item("naive_beta_ignored"), item("dummy_kernel"), item("solution")
    passed = sum(c["passed"] for c in bug["checks"])
    assert 0 < passed < len(bug["checks"]), bug["message"]
    assert bug["points"] == partial_points(10, passed, len(bug["checks"]))
    assert bug["status"] == PARTIAL
    assert bug["message"].startswith(f"{passed} of {len(bug['checks'])} cases: ")
    assert any(c["passed"] for c in dummy["checks"])  # the cases not replayed pass ...
    assert dummy["points"] == 0 and dummy["status"] == FAIL  # ... and earn nothing
    assert solution["points"] == solution["max_points"] == 10


def _training(tmp_path, monkeypatch, silent_in_mode_1: int, wrong_mode_1: bool):
    """grade_training on the solution with a stand-in worker: mode 0 agrees with the
    reference; mode 1 has wrong parameters, or calls that launched none of the
    submission's kernels (the audit's verdict), as asked."""
    import numpy as np

    from grader.isolation.runner import WorkerRun
    from grader.parts import net as net_part
    from nnkit.submission import NAMED

    reference = net_part.train_reference(net_part.training_plan(False))

    def worker(job, workdir, timeout, on_gpu, **kw):
        out = workdir / "out"
        out.mkdir(parents=True, exist_ok=True)
        for m, params in enumerate(reference.params):
            named = params.named()
            if m == 1 and wrong_mode_1:
                named = {k: v + np.float32(0.5) for k, v in named.items()}
            np.savez(out / f"train-{m}.npz", **named)
            audit = {"call": 0, "function": "forward", "missing": 0,
                     "worst_relative_difference": 0.0}
            (out / f"train-{m}.json").write_text(json.dumps({
                "silent": {"forward": silent_in_mode_1 if m == 1 else 0},
                "audits": [audit]}))
        return WorkerRun(out, 0, False, "", "fake", 1.0)

    monkeypatch.setattr(net_part, "run_worker", worker)
    config = load_config()
    items = {**config.items,
             "net.agreement": {**config.items["net.agreement"], "credit": "partial"}}
    items = net_part.grade_training(NAMED["solution"], tmp_path, replace(config, items=items),
                                    False, reference)
    return next(i for i in items if i.id == "net.agreement")


def test_a_training_mode_that_breaks_the_rules_zeroes_partial_agreement(tmp_path,
                                                                       monkeypatch):
    wrong = _training(tmp_path / "a", monkeypatch, silent_in_mode_1=0, wrong_mode_1=True)
    assert wrong.status == PARTIAL and wrong.points == partial_points(10, 1, 2)
    unaudited = _training(tmp_path / "b", monkeypatch, silent_in_mode_1=3, wrong_mode_1=False)
    assert (unaudited.points, unaudited.status) == (0.0, FAIL)
    assert "launched none of the submission's kernels" in unaudited.message
