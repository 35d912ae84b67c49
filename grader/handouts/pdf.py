"""A rendered handout printed to PDF by headless Chromium, the browser that already takes
the kit's screenshots (grader/reports/screenshot.py): no further Python package, and the
page's own print stylesheet decides the layout."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from grader.reports.screenshot import FLAGS, ScreenshotError, find_chromium


def available() -> bool:
    return find_chromium() is not None


def print_pdf(page: Path, pdf: Path, timeout: float = 120.0) -> Path:
    """Print the HTML file `page` to `pdf` (A4, no header or footer)."""
    browser = find_chromium()
    if browser is None:
        raise ScreenshotError("no Chromium found (apt install chromium, or set CHROMIUM)")
    page, pdf = Path(page).resolve(), Path(pdf).resolve()
    pdf.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        argv = [browser, *FLAGS, f"--user-data-dir={profile}", "--no-pdf-header-footer",
                f"--print-to-pdf={pdf}", page.as_uri()]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            raise ScreenshotError(f"Chromium took more than {timeout:g} s") from err
    if not pdf.exists() or pdf.stat().st_size == 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ScreenshotError(f"Chromium wrote no PDF (exit {result.returncode}): {tail}")
    return pdf
