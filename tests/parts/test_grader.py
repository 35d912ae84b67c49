"""The grader end to end on the bundled submissions, and on submissions that misbehave."""

import csv
import json
import textwrap

import pytest

from grader.examples import all_specs
from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config, speed_share
from nnkit.backend import probe_gpu
from tests.conftest import TESTS, run_kit

CORRECTNESS = ["gemm.naive.correctness", "gemm.shared.correctness", "gemm.register.correctness",
               "net.kernels", "net.softmax", "net.column_sums", "net.sgd", "net.forward",
               "net.backward", "net.agreement", "net.accuracy"]
BUGS = TESTS / "bugs"


def _grade_set(out, *submissions):
    result = run_kit("grader", *submissions, "--parts", "gemm,net", "--out", str(out),
                     "--jobs", "2", timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    return out, result.stdout, reports


@pytest.fixture(scope="module")
def graded_pair(tmp_path_factory):
    """The solution and the starter on Parts 1 and 2: what `make test` grades end to end.
    (Part 3 grades the MPI modules with the kit's own network; tests/parts/test_mpi_grader.py
    grades it for the solution, the starter and the MPI bugs.)"""
    return _grade_set(tmp_path_factory.mktemp("grades"), "solution", "starter")


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """One grading run over the default set: solution, starter and the example bugs, on
    Parts 1 and 2 (slow: five more submissions, each with its three GEMM kernels)."""
    return _grade_set(tmp_path_factory.mktemp("bundled"))


def _points(report, item_id):
    return next(i for i in report["items"] if i["id"] == item_id)["points"]


def test_solution_gets_every_correctness_point(graded_pair):
    _, _, reports = graded_pair
    for item in CORRECTNESS:
        item_result = next(i for i in reports["solution"]["items"] if i["id"] == item)
        if item_result["points"] is None:  # accuracy in the reduced configuration only
            assert item == "net.accuracy" and "reduced configuration" in item_result["message"]
            continue
        assert item_result["points"] == item_result["max_points"] > 0, item_result["message"]


def test_starter_gets_zero_without_crashing(graded_pair):
    _, _, reports = graded_pair
    for item in CORRECTNESS:
        if _points(reports["starter"], item) is None:  # as for the solution, above
            assert item == "net.accuracy"
            continue
        assert _points(reports["starter"], item) == 0
        message = next(i for i in reports["starter"]["items"] if i["id"] == item)["message"]
        assert "NotImplementedError" in message


def _assert_loses_its_items(report, spec):
    lost = {i["id"] for i in report["items"]
            if i["points"] is not None and i["points"] < i["max_points"]}
    graded = {i["id"] for i in report["items"] if i["points"] is not None}
    assert set(spec.loses) & graded <= lost, "a bug the grader missed"
    assert lost <= set(spec.loses) | set(spec.may_lose), "points lost for nothing"
    assert lost, "a bug that loses nothing tests nothing"


@pytest.mark.slow
@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)
def test_each_bundled_bug_loses_exactly_its_items(bundled, spec):
    _assert_loses_its_items(bundled[2][spec.name], spec)


def _grade_bugs(tmp_path_factory, folder, *options):
    out = tmp_path_factory.mktemp(folder.name)
    result = run_kit("grader", "--bugs", str(folder), *options, "--out", str(out),
                     "--jobs", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}


@pytest.fixture(scope="module")
def network_bugs(tmp_path_factory):
    """The Part 2 bugs kept under tests/bugs/net, graded on Part 2 only."""
    return _grade_bugs(tmp_path_factory, BUGS / "net", "--parts", "net")


@pytest.mark.slow
@pytest.mark.parametrize("spec", all_specs(BUGS / "net"), ids=lambda s: s.name)
def test_each_network_bug_loses_exactly_its_items(network_bugs, spec):
    _assert_loses_its_items(network_bugs[spec.name], spec)


@pytest.fixture(scope="module")
def gemm_bugs(tmp_path_factory):
    """The Part 1 bugs kept under tests/bugs/gemm, graded on Part 1 only."""
    return _grade_bugs(tmp_path_factory, BUGS / "gemm", "--parts", "gemm")


@pytest.mark.slow
@pytest.mark.parametrize("spec", all_specs(BUGS / "gemm"), ids=lambda s: s.name)
def test_each_gemm_bug_loses_exactly_its_items(gemm_bugs, spec):
    _assert_loses_its_items(gemm_bugs[spec.name], spec)


@pytest.fixture(scope="module")
def checker_bugs(tmp_path_factory):
    """Bugs whose results often come out right: the simulator's checker must see them."""
    if probe_gpu()[0]:
        pytest.skip("the race and index checker runs in the simulator only")
    checker = BUGS / "checker"
    return {**_grade_bugs(tmp_path_factory, checker / "gemm", "--parts", "gemm",
                          "--kernels", "naive,shared"),
            **_grade_bugs(tmp_path_factory, checker / "net", "--parts", "net")}


@pytest.mark.slow
@pytest.mark.parametrize("spec", all_specs(BUGS / "checker" / "gemm")
                         + all_specs(BUGS / "checker" / "net"), ids=lambda s: s.name)
def test_bugs_only_the_checker_sees_are_caught(checker_bugs, spec):
    report = checker_bugs[spec.name]
    _assert_loses_its_items(report, spec)
    item = next(i for i in report["items"] if i["id"] == spec.loses[0])
    assert "checker found" in item["message"]


@pytest.fixture(scope="module")
def checker_naive(tmp_path_factory):
    """The checker's GEMM bugs on the naive kernel only (quick: no 1,024-thread blocks)."""
    if probe_gpu()[0]:
        pytest.skip("the race and index checker runs in the simulator only")
    return _grade_bugs(tmp_path_factory, BUGS / "checker" / "gemm", "--parts", "gemm",
                       "--kernels", "naive")


def test_a_right_result_from_a_wrong_kernel_is_still_failed(checker_naive):
    """The known hole of result-only checks: every C is right, yet the kernel is wrong."""
    item = checker_naive["naive_negative_index"]["items"][0]
    assert item["id"] == "gemm.naive.correctness" and item["points"] == 0
    assert all("within the float32 bound" in c["message"] and "negative-index" in c["message"]
               for c in item["checks"])


def test_reports_table_and_csv(graded_pair):
    out, stdout, reports = graded_pair
    assert "CUDA simulator" in stdout or "GPU (" in stdout
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert {r["submission"] for r in rows} == set(reports)
    solution = next(r for r in rows if r["submission"] == "solution")
    assert float(solution["total"]) == float(solution["max_total"]) > 0
    for name in reports:
        assert name in stdout
    assert "Part 1, GEMM" in stdout and "Part 2, the network" in stdout
    for name in reports:
        assert (out / "feedback" / f"{name}.html").stat().st_size > 1000
        gradescope = json.loads((out / "gradescope" / f"{name}.json").read_text())
        assert gradescope["score"] == pytest.approx(reports[name]["total"])
    assert (out / "feedback" / "summary.html").exists()


def test_performance_is_not_graded_without_a_gpu(graded_pair):
    _, stdout, reports = graded_pair
    if "GPU (" in stdout:
        pytest.skip("a GPU is present")
    perf = [i for i in reports["solution"]["items"] if i["id"].endswith(".performance")]
    assert perf and all(i["points"] is None and i["status"] == "not graded" for i in perf)
    assert "n/g" in stdout


def _grade_one(tmp_path, source, limit=60):
    """Grade a submission holding only gemm_1_naive.py with `source` as its launcher body."""
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / "gemm_1_naive.py").write_text(textwrap.dedent(source))
    config = tmp_path / "config.toml"
    text = DEFAULT_CONFIG.read_text()
    text = text.replace("seconds_simulator = 600", f"seconds_simulator = {limit}")
    config.write_text(text.replace("seconds_gpu = 180", f"seconds_gpu = {limit}"))
    out = tmp_path / "out"
    result = run_kit("grader", str(sub), "--parts", "gemm", "--kernels", "naive",
                     "--config", str(config),
                     "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((out / "submission.json").read_text())
    return next(i for i in report["items"] if i["id"] == "gemm.naive.correctness")


def test_infinite_loop_is_stopped(tmp_path):
    item = _grade_one(tmp_path, """
        def gemm_naive(A, B, C, alpha, beta):
            while True:
                pass
    """, limit=4)
    assert item["points"] == 0 and "time limit" in item["message"]


def test_exit_with_status_zero_earns_nothing(tmp_path):
    item = _grade_one(tmp_path, """
        import os
        def gemm_naive(A, B, C, alpha, beta):
            os._exit(0)
    """)
    assert item["points"] == 0 and "stopped early" in item["message"]


def test_syntax_error_is_reported(tmp_path):
    item = _grade_one(tmp_path, "def gemm_naive(A, B, C, alpha, beta)\n    pass\n")
    assert item["points"] == 0 and "SyntaxError" in item["message"]


def test_missing_function_is_reported(tmp_path):
    item = _grade_one(tmp_path, "def something_else():\n    pass\n")
    assert item["points"] == 0 and "no function gemm_naive" in item["message"]


def test_sys_exit_at_import_is_contained(tmp_path):
    item = _grade_one(tmp_path, "import sys\nsys.exit(0)\n")
    assert item["points"] == 0 and "SystemExit" in item["message"]


def test_writing_nothing_is_caught(tmp_path):
    """A launcher that does nothing: no kernel ran (and C is left as it was)."""
    item = _grade_one(tmp_path, """
        def gemm_naive(A, B, C, alpha, beta):
            pass
    """)
    assert item["points"] == 0 and "launched none of the submission's kernels" in \
        item["message"], item["message"]


def test_speed_share_formula():
    assert speed_share(1.0, 1.2, 10.0) == 1.0
    assert speed_share(1.2, 1.2, 10.0) == 1.0
    assert speed_share(10.0, 1.2, 10.0) == 0.0
    assert speed_share(float("nan"), 1.2, 10.0) == 0.0
    mid = speed_share(2.4, 1.2, 10.0)
    assert 0.0 < mid < 1.0
    assert speed_share(1.2000001, 1.2, 10.0) == pytest.approx(1.0, abs=1e-6)
    assert speed_share(9.99999, 1.2, 10.0) == pytest.approx(0.0, abs=1e-5)


def test_bad_config_is_rejected(tmp_path):
    bad = tmp_path / "config.toml"
    bad.write_text(DEFAULT_CONFIG.read_text().replace("full_at = 1.2", "full_at = 20"))
    with pytest.raises(ConfigError, match="full_at"):
        load_config(bad)
    bad.write_text("not toml [")
    with pytest.raises(ConfigError):
        load_config(bad)
    assert load_config().points("gemm.naive.correctness") > 0
