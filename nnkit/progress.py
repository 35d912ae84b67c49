"""A dependency-free progress bar for long loops (grading, training), drawn on stderr."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`with Progress(total, "grading") as bar: ... bar.update(label)` after each step.

    On a terminal the bar redraws in place; in a log file it prints a line at every tenth
    of the way (and for every step when there are few), so logs stay short.
    """

    def __init__(self, total: int, title: str, stream: TextIO | None = None, width: int = 28):
        self.total = max(total, 1)
        self.title = title
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self.start = time.perf_counter()
        self.tty = self.stream.isatty()
        self._logged_tenths = -1

    def _draw(self, label: str) -> None:
        filled = int(self.width * self.done / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self.start
        line = f"{self.title} [{bar}] {self.done}/{self.total} {elapsed:6.1f}s {label}"
        if self.tty:
            self.stream.write("\r\033[K" + line[:200])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def show(self, label: str) -> None:
        """Say what is being worked on, without advancing."""
        if self.tty:
            self._draw(label)

    def update(self, label: str = "") -> None:
        self.done += 1
        tenths = 10 * self.done // self.total
        if self.tty or self.total <= 20 or tenths > self._logged_tenths:
            self._logged_tenths = tenths
            self._draw(label)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
