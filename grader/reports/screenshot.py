"""Render feedback pages to PNG in headless Chromium: a check that the HTML reports render,
and pictures of them for the docs.

    python -m grader.reports.screenshot grades/feedback/alice.html alice.png [--width 1100]

Chromium comes from Debian's `chromium` package (or set CHROMIUM=/path/to/chrome). The
page is loaded from disk with the network off, as a student would open it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
# Headless, no sandbox (it runs as root on CI machines), and nothing that calls home.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--run-all-compositor-stages-before-draw",
         "--virtual-time-budget=5000")


class ScreenshotError(RuntimeError):
    """Chromium is missing, failed, or wrote no picture."""


def find_chromium() -> str | None:
    configured = os.environ.get("CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


def run_chromium(page: Path, out: Path, flags: list[str], what: str,
                 timeout: float = 120.0) -> Path:
    """Load the HTML file `page` in headless Chromium with `flags` (which make it write
    `out`) and return `out`, or say why nothing came of it (`what` it should have been)."""
    browser = find_chromium()
    if browser is None:
        raise ScreenshotError("no Chromium found (apt install chromium, or set CHROMIUM)")
    page, out = Path(page).resolve(), Path(out).resolve()
    if not page.is_file():
        raise ScreenshotError(f"{page}: no such page")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        argv = [browser, *FLAGS, f"--user-data-dir={profile}", *flags, page.as_uri()]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            raise ScreenshotError(f"Chromium took more than {timeout:g} s") from err
    if not out.exists() or out.stat().st_size == 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ScreenshotError(f"Chromium wrote no {what} (exit {result.returncode}): {tail}")
    return out


def screenshot(page: Path, png: Path, width: int = 1100, height: int = 1600,
               timeout: float = 120.0) -> Path:
    """Render the HTML file `page` into `png` (width x height CSS pixels)."""
    png = Path(png).resolve()
    return run_chromium(page, png, [f"--window-size={width},{height}", f"--screenshot={png}"],
                        "picture", timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.reports.screenshot",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1100)
    parser.add_argument("--height", type=int, default=1600)
    args = parser.parse_args(argv)
    try:
        path = screenshot(args.page, args.png, args.width, args.height)
    except ScreenshotError as err:
        print(f"grader.reports.screenshot: {err}", file=sys.stderr)
        return 1
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
