"""A dependency-free progress bar for long loops (grading, training), drawn on stderr."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`with Progress(total, "grading") as bar: ... bar.update(label)` after each step.

    On a terminal the bar redraws in place; in a log file it prints a line per step.
    """

    def __init__(self, total: int, title: str, stream: TextIO | None = None, width: int = 28):
        self.total = max(total, 1)
        self.title = title
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self.start = time.perf_counter()
        self.tty = self.stream.isatty()

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
        self._draw(label)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
