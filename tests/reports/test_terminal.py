"""The terminal: the progress bar (nnkit/progress.py) and the grader's tables
(grader/reports/report.py), both drawn with rich."""

from __future__ import annotations

import io

from rich.cells import cell_len

from grader.reports import report
from grader.results import ItemResult, SubmissionResult
from nnkit.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_in_a_log_is_plain_lines_at_every_tenth():
    log = io.StringIO()
    with Progress(100, "grading", log) as bar:
        bar.show("not in a log")
        for n in range(100):
            bar.update(f"step {n}")
    lines = log.getvalue().splitlines()
    assert len(lines) == 11  # the first step, then each tenth
    assert lines[0].startswith("grading [") and " 1/100 " in lines[0]
    assert lines[-1].startswith("grading [" + "#" * 28 + "] 100/100 ")
    assert "\x1b" not in log.getvalue() and "not in a log" not in log.getvalue()


def test_progress_on_a_terminal_redraws_one_bar_and_shows_labels_as_text():
    tty = _Terminal()
    with Progress(3, "grading", tty) as bar:
        bar.show("[red]starting[/]")
        for n in range(3):
            bar.update(f"sub[/b]{n}")  # not rich markup: a name may hold anything
    out = tty.getvalue()
    assert "\x1b[" in out  # drawn for a terminal, redrawn in place
    last = out.removesuffix("\x1b[?25h").rpartition("\r")[2]  # the bar as it was left
    assert "3/3" in last and "sub[/b]2" in last and "grading" in last


def test_the_grader_table_aligns_wide_names_and_shows_brackets_as_text():
    item = ItemResult("gemm.naive.correctness", "naive", 10.0, 10.0, "pass", "ok")
    names = ["学生一号", "[bold]eve[/]", "bob"]
    text = report.table([SubmissionResult(n, "/x", "sim", [item]) for n in names], "sim")
    rows = [line for line in text.splitlines() if line.endswith("10/10")]
    assert [r.split()[0] for r in rows] == names
    # "10/10" starts in the same terminal column on every row, CJK names included
    assert len({cell_len(r[: r.index("10/10")]) for r in rows}) == 1


def test_a_list_of_seconds_is_shown_as_times_and_anything_else_as_json():
    from grader.reports.text import format_value

    assert format_value("epoch_seconds", [0.0477, 0.05, 1.5]) == "47.7 ms, 50 ms, 1.5 s"
    assert format_value("epoch_seconds", [1, "a"]) == '[1, "a"]'
    assert format_value("epoch_seconds", []) == "[]"
