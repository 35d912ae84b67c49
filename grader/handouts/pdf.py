"""A rendered handout printed to PDF by headless Chromium, the browser that already takes
the kit's screenshots (grader/reports/screenshot.py): no further Python package, and the
page's own print stylesheet decides the layout."""

from __future__ import annotations

from pathlib import Path

from grader.reports.screenshot import find_chromium, run_chromium


def available() -> bool:
    return find_chromium() is not None


def print_pdf(page: Path, pdf: Path, timeout: float = 120.0) -> Path:
    """Print the HTML file `page` to `pdf` (A4, no header or footer)."""
    pdf = Path(pdf).resolve()
    return run_chromium(page, pdf, ["--no-pdf-header-footer", f"--print-to-pdf={pdf}"],
                        "PDF", timeout)
