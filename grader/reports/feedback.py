"""Feedback for one graded submission: a Markdown and an HTML report, with plots.

The input is the dict of `SubmissionResult.to_json()` (grader/results.py), read generically:
every item gets a table of its checks whatever their keys, and each plot is drawn only when
its data is present:

- checks with `gflops` (and `solution_gflops`, `cublas_gflops`): GFLOP/s per benchmark case;
- figures `relative_max_norm` / `relative_l2_norm` (one value per parameter), with the
  figure `tolerance` as a line;
- checks with `worst_error_over_bound`: each case's worst error over its bound, against 1.

Text from results (student messages above all: any unicode, `<`, `|`, newlines) is escaped
for HTML and made safe for Markdown; long messages are shortened in tables and shown whole
below them. The plots are PNG files in `<name>_files/` beside the two reports, referenced by
relative links, so the folder can be copied or opened from disk as it is.

Its parts, shared with grader/reports/gradescope.py and summary.py: text.py (escaping,
numbers), reading.py (a result read tolerantly), plots.py, view.py (what the two pages
show) and templating.py, which renders the Jinja2 templates in templates/ with escaping
on by default in both formats.
"""

from __future__ import annotations

from pathlib import Path

from grader.reports.plots import make_plots
from grader.reports.reading import normalize
from grader.reports.templating import render
from grader.reports.text import file_stem
from grader.reports.view import feedback_view


def write_feedback(result: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write `<name>.md` and `<name>.html` for one submission's result (the dict of
    SubmissionResult.to_json()), with their plots in `<name>_files/`; return the two paths.

    `<name>` is the submission's id (report.safe_name: unique, stable, safe). PNG files
    left in `<name>_files/` by an earlier call are removed first, so the folder holds only
    the plots of this result; it is not created when no item has data to plot.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = normalize(result)
    stem = data["id"]
    folder = out_dir / f"{stem}_files"
    for old in folder.glob("*.png"):
        old.unlink()
    plots = [make_plots(it, folder, f"{n:02d}_{file_stem(it['id'])}")
             for n, it in enumerate(data["items"], 1)]
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    md_path, html_path = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    view = feedback_view(data, plots, folder.name)
    md_path.write_text(render("feedback.md.j2", **view), encoding="utf-8")
    html_path.write_text(render("feedback.html.j2", **view), encoding="utf-8")
    return md_path, html_path
