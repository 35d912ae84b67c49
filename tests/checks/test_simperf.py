"""The memory-traffic figure of a GEMM item (grader/checks/simperf.py): read from the
worker's files, beside the solution's, and shown in the feedback as "not points"."""

import json
import shutil

import pytest

from grader.checks import simperf
from grader.reports import reading
from grader.reports.feedback import write_feedback
from grader.reports.report import details
from grader.results import PASS, ItemResult, SubmissionResult
from nnkit.submission import NAMED
from tests.conftest import run_kit


def _counts(**over: int) -> dict[str, int]:
    base = dict.fromkeys(simperf.COUNT_FIELDS, 0)
    base.update(launches=1, global_load_requests=10, global_load_sectors=320,
                global_load_accesses=320, global_store_requests=2, global_store_sectors=8,
                global_store_accesses=64, shared_load_requests=4, shared_load_conflicts=124,
                shared_load_accesses=128)
    base.update(over)
    return base


def _figure(name: str = "my_kernel") -> dict:
    yours = {name: _counts()}
    solution = {"gemm_naive_kernel": _counts(global_load_sectors=40, shared_load_conflicts=0)}
    return simperf.figure("32x32x16 AB", 32 * 32 * 16, (yours, ""), (solution, ""))


def test_read_counts_takes_the_worker_file_and_says_why_when_there_is_none(tmp_path):
    counts, why = simperf.read_counts(tmp_path)
    assert counts is None and "stopped before" in why
    (tmp_path / simperf.PROFILE_FILE).write_text("{not json")
    assert simperf.read_counts(tmp_path) == (None, "not counted (unreadable counts)")
    (tmp_path / simperf.PROFILE_FILE).write_text(json.dumps(
        {"kernels": {"k": {**_counts(), "extra": 5}}}))
    counts, why = simperf.read_counts(tmp_path)
    assert why == "" and counts == {"k": {**_counts(), "arrays": {}}}  # the known fields
    (tmp_path / simperf.PROFILE_ERROR).write_text("IndexError: out of range")
    counts, why = simperf.read_counts(tmp_path)
    assert counts is None and "IndexError" in why


def test_read_counts_refuses_huge_linked_or_garbage_files_unread(tmp_path):
    # The worker ran submitted code: its counts file is read as any job's result.
    profile = tmp_path / simperf.PROFILE_FILE
    with open(profile, "wb") as f:  # sparse: 1 GiB that costs no disk
        f.truncate(1 << 30)
    assert simperf.read_counts(tmp_path) == (None, "not counted (unreadable counts)")
    profile.unlink()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"kernels": {"k": _counts()}}))
    profile.symlink_to(secret)
    assert simperf.read_counts(tmp_path) == (None, "not counted (unreadable counts)")
    profile.unlink()
    for garbage in ('{"kernels": {"k": {"launches": Infinity}}}', '{"kernels": [1, 2]}',
                    "[" * 100_000, "\xff\xfe\x00"):
        profile.write_text(garbage)
        assert simperf.read_counts(tmp_path) == (None, "not counted (unreadable counts)")
    error = tmp_path / simperf.PROFILE_ERROR
    with open(error, "wb") as f:
        f.write(b"\x1b[31mboom" + b"x" * 10_000)
        f.truncate(1 << 30)
    counts, why = simperf.read_counts(tmp_path)
    assert counts is None and "boom" in why and "\x1b" not in why and len(why) < 600


def test_metrics_are_ratios_of_the_counts():
    m = simperf.metrics(_counts(), 1024)
    assert m["sectors_per_load"] == 32.0 and m["sectors_per_store"] == 4.0
    assert m["conflicts_per_shared_load"] == 31.0
    assert m["conflicts_per_shared_store"] is None  # no shared store at all
    assert m["global_loads_per_fma"] == pytest.approx(320 / 1024, abs=1e-4)


def test_by_argument_names_the_operand_at_fault():
    arrays = {"A": [16, 512, 0, 0], "B": [16, 16, 0, 0], "C": [0, 0, 2, 64]}
    assert simperf.by_argument(arrays) == "A load 32, B load 1, C store 32"
    assert simperf.by_argument({}) == ""


def test_figure_puts_yours_beside_the_solution_and_notes_what_is_missing():
    fig = _figure()
    assert [(r["who"], r["kernel"]) for r in fig["rows"]] == [
        ("yours", "my_kernel"), ("solution", "gemm_naive_kernel")]
    assert fig["rows"][1]["sectors_per_load"] == 4.0
    alone = simperf.figure("c", 8, ({"k": _counts()}, ""), (None, "not part of this kit"))
    assert [r["who"] for r in alone["rows"]] == ["yours"]
    assert alone["missing"] == ["solution: not part of this kit"]
    headers, rows, notes = simperf.table(alone)
    assert "no points" in notes[0] and "solution: not part of this kit" in notes


def test_solution_counts_are_measured_once_per_run_and_kernel(tmp_path):
    calls = []

    def measure():
        calls.append(1)
        return {"k": _counts()}, ""

    for _ in range(3):
        assert simperf.solution_counts(tmp_path, "naive", measure)[0] == {"k": _counts()}
    assert len(calls) == 1
    failing = simperf.solution_counts(tmp_path, "shared", lambda: 1 / 0)
    assert failing[0] is None and "ZeroDivisionError" in failing[1]


@pytest.mark.parametrize("value", [None, 3, "text", {"rows": "no"}, {}])
def test_table_ignores_what_is_not_a_figure(value):
    assert simperf.table(value) is None
    assert simperf.text_lines(value) == []


def test_feedback_shows_the_table_apart_and_escaped(tmp_path):
    figure = _figure("<b>k</b>")
    item = ItemResult("gemm.naive.correctness", "Naive GEMM", 10, 10, PASS, "ok",
                      figures={"worker_seconds": 1.5, simperf.KEY: figure})
    result = SubmissionResult("alice", "/x", "CUDA simulator", [item])
    md_path, html_path = write_feedback(result.to_json(), tmp_path)
    md, html = md_path.read_text(), html_path.read_text()
    for page in (md, html):
        assert "Memory traffic (not points)" in page
        assert "gemm_naive_kernel" in page and "bank conflicts per shared load request" in page
    assert "<b>k</b>" not in html and "&lt;b&gt;k&lt;/b&gt;" in html
    # not drawn a second time as a generic figure
    assert reading.figure_table(item.figures) is None
    assert [k for k, _ in reading.figure_scalars(item.figures)] == ["time in the worker"]
    text = details([result])
    assert "yours: <b>k</b>: global sectors per load request 32" in text
    assert "solution: gemm_naive_kernel: global sectors per load request 4" in text


@pytest.mark.slow
def test_a_simulated_grading_shows_an_uncoalesced_kernel_beside_the_solution(tmp_path):
    # The solution's naive GEMM with threadIdx.x on the rows instead of the columns: still
    # correct (full points), but a warp now reads 32 rows of A and writes a column of C.
    sub = tmp_path / "uncoalesced"
    shutil.copytree(NAMED["solution"], sub)
    naive = sub / "gemm_1_naive.py"
    source = naive.read_text()
    for old, new in [("    j, i = cuda.grid(2)\n", "    i, j = cuda.grid(2)\n"),
                     ("grid = ((N + BLOCK_X - 1) // BLOCK_X, (M + BLOCK_Y - 1) // BLOCK_Y)",
                      "grid = ((M + BLOCK_X - 1) // BLOCK_X, (N + BLOCK_Y - 1) // BLOCK_Y)")]:
        assert old in source
        source = source.replace(old, new)
    naive.write_text(source)
    done = run_kit("grader", str(sub), "--parts", "gemm", "--kernels", "naive",
                   "--out", str(tmp_path / "out"), env={"NNKIT_DEVICE": "sim"})
    assert done.returncode == 0, done.stderr[-2000:]
    (item,) = [it for it in json.loads((tmp_path / "out" / "uncoalesced.json").read_text())[
        "items"] if it["id"] == "gemm.naive.correctness"]
    assert item["points"] == item["max_points"]  # feedback only: no point lost
    yours, solution = item["figures"][simperf.KEY]["rows"]
    assert (yours["who"], solution["who"]) == ("yours", "solution")
    # Per k: A 32 sectors + B a broadcast (yours), A a broadcast + B 4 sectors (solution).
    assert yours["sectors_per_load"] == 16.5 and yours["sectors_per_store"] == 32.0
    assert solution["sectors_per_load"] == 2.5 and solution["sectors_per_store"] == 4.0
    assert yours["global_loads_per_fma"] == solution["global_loads_per_fma"] == 2.0
    assert yours["sectors_by_argument"] == "A load 32, B load 1, C store 32"
    assert solution["sectors_by_argument"] == "A load 1, B load 4, C store 4"
    feedback = (tmp_path / "out" / "feedback" / "uncoalesced.md").read_text()
    assert "| yours: gemm_naive_kernel | 16.5 | 32 | A load 32, B load 1, C store 32 |" in feedback
