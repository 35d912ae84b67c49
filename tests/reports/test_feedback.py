"""Feedback reports, Gradescope results.json and the class summary, from result dicts shaped
like SubmissionResult.to_json() (figures copied from a real GPU run, trimmed)."""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pytest

from grader.reports.feedback import write_feedback
from grader.reports.gradescope import gradescope_results, write_gradescope
from grader.reports.summary import summarize, write_summary

PNG = b"\x89PNG\r\n\x1a\n"
SCRIPT = "<script>alert(1)</script>"


def _correctness(kernel: str, passed: bool, message: str = "") -> dict:
    checks = [
        {"case": "1x1x1 AB α=1 β=0 guarded", "passed": True,
         "message": "all 1 elements within the float32 bound", "worst_error_over_bound": 0.107},
        {"case": "17x5x3 AB α=2 β=5", "passed": passed,
         "message": message or "all 85 elements within the float32 bound",
         "worst_error_over_bound": 0.17 if passed else 1715821.2},
    ]
    return {"id": f"gemm.{kernel}.correctness", "title": f"{kernel} GEMM: correct",
            "max_points": 10.0, "points": 10.0 if passed else 0.0,
            "status": "pass" if passed else "fail",
            "message": "all 2 cases within the float32 error bound" if passed
            else f"1 of 2 cases fail; first: 17x5x3 AB α=2 β=5: {message}",
            "checks": checks, "figures": {"worker_seconds": 3.04}}


def _performance(kernel: str, points: float | None) -> dict:
    item = {"id": f"gemm.{kernel}.performance", "title": f"{kernel} GEMM: speed",
            "max_points": 5.0, "points": points, "checks": [], "figures": {}}
    if points is None:
        return {**item, "status": "not graded",
                "message": "not graded (no GPU): performance is graded on a GPU only"}
    item["checks"] = [
        {"case": "800x1000x784 AB α=2 β=5", "seconds": 0.000359, "gflops": 3491.1,
         "solution_gflops": 4134.9, "cublas_gflops": 17379.7, "time_over_solution": 1.18,
         "share_of_cublas": 0.2009},
        {"case": "2048x2048x2048 AB α=2 β=5", "seconds": 0.00226, "gflops": 7598.3,
         "solution_gflops": 7589.3, "cublas_gflops": 45989.9, "time_over_solution": 0.999,
         "share_of_cublas": 0.1652},
    ]
    return {**item, "status": "pass" if points == 5.0 else "partial",
            "message": "time / solution's time = 1.09 (geometric mean over 2 shapes)",
            "figures": {"time_over_solution": 1.09}}


def _network() -> dict:
    """A Part 2 item: agreement of the trained parameters with the reference."""
    return {"id": "net.gpu.agreement", "title": "Network on the GPU: agrees with the CPU",
            "max_points": 10.0, "points": 10.0, "status": "pass", "message": "within 1e-4",
            "checks": [],
            "figures": {"relative_max_norm": {"W1": 3e-7, "b1": 1e-7, "W2": 2e-6, "b2": 0.0},
                        "relative_l2_norm": {"W1": 1e-7, "b1": 5e-8, "W2": 8e-7, "b2": 0.0},
                        "tolerance": 1e-4}}


def _result(name: str, items: list[dict], backend: str = "GPU (NVIDIA H200)") -> dict:
    graded = [it for it in items if it["points"] is not None]
    return {"name": name, "path": f"/subs/{name}", "backend": backend, "items": items,
            "total": sum(it["points"] for it in graded),
            "max_total": sum(it["max_points"] for it in graded)}


@pytest.fixture
def gpu_result() -> dict:
    return _result("alice", [_correctness("naive", False, "85 of 85 elements wrong"),
                             _performance("naive", 0.0) | {
                                 "checks": [], "status": "fail", "figures": {},
                                 "message": "not timed: the kernel must pass its correctness "
                                            "item first"},
                             _correctness("shared", True), _performance("shared", 5.0),
                             _network()])


@pytest.fixture
def sim_result() -> dict:
    """Nothing to plot: the checks have no finite error ratio, performance is not graded."""
    item = _correctness("naive", False, "raised NotImplementedError: write gemm_naive()")
    for check in item["checks"]:
        check.update(passed=False, worst_error_over_bound=None)
    return _result("bob", [item, _performance("naive", None)], backend="CUDA simulator")


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def _tables(markdown: str) -> list[list[str]]:
    tables, current = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


# --- feedback ---------------------------------------------------------------------------------


def test_feedback_writes_both_reports(gpu_result, tmp_path):
    md, html = write_feedback(gpu_result, tmp_path)
    assert (md.name, html.name) == ("alice.md", "alice.html")
    for text in (md.read_text(encoding="utf-8"), html.read_text(encoding="utf-8")):
        assert "25 / 40 points" in text
        assert "GPU (NVIDIA H200)" in text
        for item in gpu_result["items"]:
            assert item["id"] in text
    # the failing check comes before the passing one in its table
    body = md.read_text(encoding="utf-8")
    assert body.index("**17x5x3 AB α=2 β=5**") < body.index("| 1x1x1 AB α=1 β=0 guarded")
    assert "1.72e+06" in body and "3,491" in body and "20.1%" in body and "1.18×" in body


def test_html_escapes_text_from_results(gpu_result, tmp_path):
    evil = copy.deepcopy(gpu_result)
    evil["name"] = f"eve{SCRIPT}"
    evil["items"][0]["message"] = f"{SCRIPT} & <b>bold</b> \u202eevil"  # bidi override
    evil["items"][0]["checks"][1]["message"] = SCRIPT
    evil["items"][0]["checks"][1]["case"] = f"case {SCRIPT}"
    _, html = write_feedback(evil, tmp_path)
    text = html.read_text(encoding="utf-8")
    assert "<script" not in text and "<b>bold" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&amp; &lt;b&gt;bold&lt;/b&gt;" in text
    assert "\u202e" not in text and "evil" in text
    assert html.parent == tmp_path and "/" not in html.name


def test_markdown_tables_survive_pipes_and_newlines(gpu_result, tmp_path):
    result = copy.deepcopy(gpu_result)
    result["items"][0]["message"] = "a | b\nsecond | line"
    result["items"][0]["checks"][1]["message"] = "x | y |\n| z"
    result["items"][0]["checks"][1]["case"] = "case|with|pipes"
    result["items"][1]["id"] = "odd|id`"
    md, _ = write_feedback(result, tmp_path)
    tables = _tables(md.read_text(encoding="utf-8"))
    assert tables
    for table in tables:
        columns = _unescaped_pipes(table[0])
        assert all(_unescaped_pipes(row) == columns for row in table), table
    assert r"case\|with\|pipes" in md.read_text(encoding="utf-8")


def test_markdown_escapes_html(gpu_result, tmp_path):
    result = copy.deepcopy(gpu_result)
    result["items"][0]["message"] = SCRIPT
    md, _ = write_feedback(result, tmp_path)
    assert "<script>" not in md.read_text(encoding="utf-8")


def test_long_message_is_shortened_in_tables_and_shown_whole(gpu_result, tmp_path):
    result = copy.deepcopy(gpu_result)
    long = "Traceback (most recent call last):\n" + "  frame line\n" * 40 + "IndexError: END"
    result["items"][0]["message"] = long
    result["items"][0]["checks"][1]["message"] = long
    md, html = write_feedback(result, tmp_path)
    for text in (md.read_text(encoding="utf-8"), html.read_text(encoding="utf-8")):
        assert "…" in text
        assert "IndexError: END" in text
        assert "  frame line\n  frame line\n" in text  # whole, lines kept
    summary_row = next(line for line in md.read_text(encoding="utf-8").splitlines()
                       if line.startswith("| 1 |"))
    assert "IndexError: END" not in summary_row


def test_plots_drawn_when_data_present(gpu_result, tmp_path):
    md, html = write_feedback(gpu_result, tmp_path)
    pngs = sorted((tmp_path / "alice_files").glob("*.png"))
    kinds = {p.stem.rsplit("_", 1)[1] for p in pngs}
    assert kinds == {"gflops", "errors", "norms"}
    assert len(pngs) == 4  # errors of both correctness items, gflops, norms
    for png in pngs:
        assert png.read_bytes().startswith(PNG)
        for report in (md, html):
            assert f"alice_files/{png.name}" in report.read_text(encoding="utf-8")


def test_no_plots_without_data(sim_result, tmp_path):
    md, html = write_feedback(sim_result, tmp_path)
    assert not (tmp_path / "bob_files").exists()
    assert "<img" not in html.read_text(encoding="utf-8")
    assert "![" not in md.read_text(encoding="utf-8")
    assert "not graded in this run" in md.read_text(encoding="utf-8")


def test_stale_plots_are_removed(gpu_result, sim_result, tmp_path):
    write_feedback(gpu_result, tmp_path)
    write_feedback({**sim_result, "name": "alice"}, tmp_path)
    assert not (tmp_path / "alice_files").exists()


def test_empty_and_partial_results_do_not_crash(tmp_path):
    odd = [
        {},
        {"name": "zero", "items": []},
        {"name": "bare", "items": [{"id": "x"}, {"title": "no id", "points": 1}]},
        {"name": "../../escape me", "backend": None, "items": [
            {"id": "weird", "max_points": 2, "points": 1, "message": "bad \ud800 \x1b[31mred\x00",
             "checks": [{"case": "nan", "passed": False, "worst_error_over_bound": math.nan},
                        {"case": "inf", "worst_error_over_bound": math.inf, "extra": [1, {}],
                         "huge": 10**400},
                        {"gflops": -1.0}, "not a dict"],
             "figures": {"relative_max_norm": {"W1": None}, "tolerance": "?"}}]},
    ]
    for n, result in enumerate(odd):
        md, html = write_feedback(result, tmp_path / str(n))
        assert md.parent == html.parent == tmp_path / str(n)
        assert md.exists() and html.exists()
        gradescope_results(result)
    # a name with a path and a space gets an id of its own (report.safe_name)
    page = next((tmp_path / "3").glob("escape_me-*.html"))
    assert "\x1b" not in page.read_text(encoding="utf-8")
    write_summary(odd, tmp_path / "summary")


# --- Gradescope -------------------------------------------------------------------------------


def test_gradescope_format(gpu_result, tmp_path):
    out = gradescope_results(gpu_result, execution_time=12.4)
    for key in ("score", "execution_time", "output", "visibility", "stdout_visibility",
                "extra_data", "tests", "leaderboard"):
        assert key in out
    assert out["execution_time"] == 12
    assert out["score"] == pytest.approx(sum(t["score"] for t in out["tests"]))
    assert out["score"] == pytest.approx(gpu_result["total"])
    for n, test in enumerate(out["tests"], 1):
        assert {"score", "max_score", "name", "number", "output", "tags",
                "visibility"} <= test.keys()
        assert test["number"] == str(n)
    assert out["tests"][0]["status"] == "failed" and out["tests"][2]["status"] == "passed"
    assert "85 of 85 elements wrong" in out["tests"][0]["output"]
    board = {e["name"]: e for e in out["leaderboard"]}
    assert board["gemm.shared 800x1000x784 AB α=2 β=5 GFLOP/s"]["value"] == 3491.1
    assert len(board) == 2 and all(e["order"] == "desc" for e in board.values())
    path = write_gradescope(gpu_result, tmp_path / "results" / "results.json")
    assert json.loads(path.read_text(encoding="utf-8"))["score"] == out["score"]


def test_gradescope_not_graded_items_do_not_lower_the_score(sim_result):
    out = gradescope_results(sim_result)
    skipped = out["tests"][1]
    assert skipped["score"] == skipped["max_score"] == 0
    assert "not graded" in skipped["tags"] and "not graded" in skipped["output"].lower()
    assert sum(t["max_score"] for t in out["tests"]) == sim_result["max_total"]
    graded_only = {**sim_result, "items": sim_result["items"][:1]}
    assert out["score"] == gradescope_results(graded_only)["score"]
    assert out["leaderboard"] == []


def test_gradescope_json_is_strict(gpu_result, tmp_path):
    result = copy.deepcopy(gpu_result)
    result["items"][3]["checks"][0]["gflops"] = math.nan
    result["items"][0]["figures"]["worker_seconds"] = math.inf
    path = write_gradescope(result, tmp_path / "results.json")
    data = json.loads(path.read_text(encoding="utf-8"))  # allow_nan=False already wrote it
    assert len(data["leaderboard"]) == 1
    with pytest.raises(ValueError):
        gradescope_results(result, visibility="sometimes")


# --- class summary ----------------------------------------------------------------------------


def _tiny_class() -> list[dict]:
    a_full, a_zero = _correctness("naive", True), _correctness("naive", False, "wrong")
    return [
        _result("s1", [a_full, _performance("naive", 5.0)]),      # 15 / 15
        _result("s2", [a_full, _performance("naive", 2.5)]),      # 12.5 / 15
        _result("s3", [a_zero, _performance("naive", None)]),     # 0 / 10
    ]


def test_summary_pass_rates():
    summary = summarize(_tiny_class())
    rates = {row["id"]: row for row in summary["items"]}
    correctness, speed = rates["gemm.naive.correctness"], rates["gemm.naive.performance"]
    assert (correctness["graded"], correctness["full"]) == (3, 2)
    assert correctness["pass_rate"] == pytest.approx(2 / 3)
    assert (speed["graded"], speed["full"]) == (2, 1)
    assert speed["pass_rate"] == pytest.approx(0.5)
    assert speed["mean_points"] == pytest.approx(3.75)
    assert summary["points"] == pytest.approx({"mean": 27.5 / 3, "median": 12.5, "min": 0,
                                               "max": 15})
    assert summary["percent"]["median"] == pytest.approx(100 * 12.5 / 15)


def test_summary_files(tmp_path):
    results = _tiny_class()
    write_feedback(results[0], tmp_path)
    html = write_summary(results, tmp_path)
    assert html == tmp_path / "summary.html"
    md = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "67%" in md and "50%" in md
    assert (tmp_path / "summary_totals.png").read_bytes().startswith(PNG)
    assert 'href="s1.html"' in html.read_text(encoding="utf-8")  # s1 has a feedback report
    assert "s2.html" not in html.read_text(encoding="utf-8")


def test_summary_of_nothing(tmp_path):
    write_summary([], tmp_path)
    assert (tmp_path / "summary.md").exists() and (tmp_path / "summary.html").exists()
    assert not (tmp_path / "summary_totals.png").exists()


def test_summary_of_one_submission_has_no_histogram(tmp_path):
    write_summary(_tiny_class()[:1], tmp_path)
    assert "s1" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert not (tmp_path / "summary_totals.png").exists()


def test_script_in_a_message_or_a_name_is_escaped_in_both_pages(gpu_result, tmp_path):
    """The templates escape every value: a submission's name and its item and check
    messages reach the feedback page and the class summary as text, never as markup."""
    evil = copy.deepcopy(gpu_result)
    evil["name"] = f"mallory{SCRIPT}"
    evil["items"][0]["message"] = f'{SCRIPT}" onmouseover="x'
    evil["items"][0]["title"] = f"title {SCRIPT}"
    evil["items"][0]["checks"][0]["message"] = SCRIPT * 40  # long: shown whole below
    evil["notes"] = [SCRIPT]
    evil["items"][-1]["figures"]["tolerance"] = SCRIPT
    _, feedback = write_feedback(evil, tmp_path)
    summary = write_summary([evil, gpu_result], tmp_path)
    for page in (feedback, summary):
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text.lower()
        assert "mallory&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert 'onmouseover="' not in text
    # the summary links the feedback page under the escaped name
    assert re.search(r'<a href="mallory[^"]*\.html">mallory&lt;script&gt;',
                     summary.read_text(encoding="utf-8"))


# --- rendering in a browser ---------------------------------------------------------------------

def test_feedback_and_summary_render_in_headless_chromium(gpu_result, sim_result, tmp_path):
    from matplotlib.image import imread

    from grader.reports.screenshot import find_chromium, screenshot

    if find_chromium() is None:
        pytest.skip("no Chromium on this machine (.ci/run installs Debian's chromium)")
    _, html = write_feedback(gpu_result, tmp_path)
    write_feedback(sim_result, tmp_path)
    summary = write_summary([gpu_result, sim_result], tmp_path)
    for page in (html, summary):
        png = screenshot(page, tmp_path / f"{page.stem}.png", width=900, height=1200)
        pixels = imread(png)[..., :3]
        assert pixels.shape[:2] == (1200, 900)
        inked = (pixels.min(axis=2) < 0.9).mean()  # share of pixels that are not near-white
        assert 0.02 < inked < 0.6, f"{page.name} rendered {inked:.1%} non-white"
    # The failed item's row is tinted red, and the error plot was loaded (its green bars),
    # not a broken-image icon.
    shot = imread(tmp_path / f"{html.stem}.png")[..., :3]
    reddish = (shot[..., 0] > 0.95) & (shot[..., 1] < 0.93) & (shot[..., 2] < 0.93)
    assert reddish.mean() > 0.001
    bar_green = np.abs(shot - np.array([0x4c, 0x9a, 0x2a]) / 255).max(axis=2) < 0.05
    assert bar_green.sum() > 200


def test_a_reporting_library_missing_costs_the_reports_not_the_run(gpu_result, tmp_path,
                                                                    monkeypatch, capsys):
    import sys

    import grader.reports
    from grader import pipeline

    # As if it could not be imported (a library it needs missing)
    monkeypatch.setitem(sys.modules, "grader.reports.feedback", None)
    monkeypatch.delattr(grader.reports, "feedback", raising=False)
    result = {**gpu_result, "id": "alice"}  # as the gradebook gives it
    pipeline.write_feedback([result], tmp_path)  # returns: the class goes on
    assert "could not write the feedback" in capsys.readouterr().err
    assert not (tmp_path / "feedback").exists()
    assert (tmp_path / "gradescope" / "alice.json").is_file()  # the grades still written
