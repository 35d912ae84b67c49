"""The bonus item (version 4 of the GEMM) in the grader: off by default, refused unless
turned on, and, when on, full points for the solution and a lost item for its bug."""

import json

import pytest

from grader.examples import all_specs
from grader.parts.gemm import graded_kernels
from grader.scoring import load_config
from nnkit.backend import probe_gpu
from tests.conftest import TESTS, run_kit
from tests.parts.test_grader import _assert_loses_its_items

BONUS_BUGS = TESTS / "bugs" / "bonus"
ITEMS = ["gemm.hierarchical.correctness", "gemm.hierarchical.performance"]


def test_bonus_kernels_are_graded_only_when_turned_on():
    from dataclasses import replace

    config = load_config()
    assert "hierarchical" not in graded_kernels(config)
    assert graded_kernels(replace(config, bonus=True))[-1] == "hierarchical"
    assert all(config.points(item) > 0 for item in ITEMS)


@pytest.mark.slow  # 18 s in the simulator: `make test` keeps the config-level check above
def test_default_run_leaves_the_bonus_out_and_naming_it_grades_it(tmp_path):
    """The starter's stubs fail at once, so both runs are quick."""
    found = {}
    for name, kernels in (("default", []), ("named", ["--kernels", "naive,hierarchical"])):
        out = tmp_path / name
        result = run_kit("grader", "starter", "--parts", "gemm", *kernels, "--out", str(out))
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads((out / "starter.json").read_text())
        found[name] = {i["id"]: i for i in report["items"]}
    assert not set(ITEMS) & set(found["default"]) and "gemm.naive.correctness" in found["default"]
    item = found["named"]["gemm.hierarchical.correctness"]
    assert item["points"] == 0 and "NotImplementedError" in item["message"]


@pytest.mark.slow
def test_solution_passes_and_the_single_buffer_bug_loses_its_item(tmp_path):
    if probe_gpu()[0]:
        pytest.skip("the race checker, which sees this bug every time, runs in the simulator")
    result = run_kit("grader", "solution", "--bugs", str(BONUS_BUGS), "--parts", "gemm",
                     "--kernels", "hierarchical", "--bonus", "--out", str(tmp_path),
                     "--jobs", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    reports = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    solution = {i["id"]: i for i in reports["solution"]["items"]}
    assert set(ITEMS) <= set(solution)
    item = solution["gemm.hierarchical.correctness"]
    assert item["points"] == item["max_points"] > 0, item["message"]
    for spec in all_specs(BONUS_BUGS):
        report = reports[spec.name]
        _assert_loses_its_items(report, spec)
        lost = next(i for i in report["items"] if i["id"] == spec.loses[0])
        assert "checker found" in lost["message"], lost["message"]
