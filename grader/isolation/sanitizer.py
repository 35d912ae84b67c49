"""On a GPU, optionally: a kernel's small cases again, under NVIDIA's compute-sanitizer.

memcheck reports out-of-bounds and misaligned accesses to global, local and shared memory;
racecheck reports shared-memory hazards (a missing syncthreads). The simulator has its own
checker (grader/simcheck.py); this is the GPU's counterpart, off by default because it
slows kernels ten to a hundred times. [checks] gpu_sanitizer in grader/config.toml turns
it on, and gpu_sanitizer_findings_fail decides whether a finding costs the item.

The tool runs inside the job's sandbox, as the parent of the worker, and its report is
read from the job's output. The submission can print there too, so the verdict is taken
from the tool's own summary line, which it prints last, after the worker has exited; a run
without that line (the tool killed, or not started) is a finding, never a clean bill.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from grader.cases.gemm import SIMULATOR_SHAPES, GemmCase, cases_of

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
PRINT_LIMIT = 20  # findings the tool prints in full
_SUMMARY = re.compile(r"^=+ ERROR SUMMARY: (\d+) errors?\s*$", re.MULTILINE)
_RACE_SUMMARY = re.compile(r"^=+ RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?",
                           re.MULTILINE)
# The first line of each finding the tools print, for the feedback.
_FINDING = re.compile(r"^=+ ((?:Invalid|Misaligned|Error|Race|Warning|Uninitialized|"
                      r"Barrier|Program hit|Out-of-range|Malformed)[^\n]*)$", re.MULTILINE)
# Larger shapes than the simulator's but still small: block edges, odd sizes, transposes.
SHAPES = SIMULATOR_SHAPES + [(513, 257, 129, 2.0, 5.0, 1, 1, 1), (67, 129, 33, 2.0, 5.0, 0, 1, 0)]


@dataclass
class Report:
    """What one tool said about one worker run."""

    tool: str
    errors: int | None  # None: the tool gave no summary
    findings: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.errors == 0

    def describe(self) -> str:
        if self.errors is None:
            return (f"compute-sanitizer {self.tool} gave no summary (the run was cut short or "
                    "the tool did not start)")
        if self.errors == 0:
            return f"compute-sanitizer {self.tool}: no errors"
        shown = "; ".join(dict.fromkeys(self.findings))[:400]
        return f"compute-sanitizer {self.tool}: {self.errors} error(s)" + (
            f": {shown}" if shown else "")


def cases() -> list[GemmCase]:
    return cases_of(SHAPES, seed0=700)


def find(configured: str = "") -> str | None:
    """The compute-sanitizer executable: as configured, on PATH, or in CUDA's usual place."""
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    homes = [h for h in (os.environ.get("CUDA_HOME"), "/usr/local/cuda") if h]
    return next((str(path) for home in homes
                 if os.access(path := Path(home, "bin", "compute-sanitizer"), os.X_OK)), None)


def launcher(executable: str, tool: str) -> list[str]:
    """What goes before the worker's interpreter on its command line (the config has
    checked the tool's name against TOOLS). Failed driver API calls are not reported:
    numba and CuPy probe the driver for entry points it may lack (cuGetProcAddress answers
    "invalid argument"), which memcheck counted as 34 errors in every submission on an
    H100; the kernels' own accesses are what the check is about."""
    return [executable, "--tool", tool, "--print-limit", str(PRINT_LIMIT),
            "--show-backtrace", "no", "--report-api-errors", "no"]


def parse(tool: str, output: str, returncode: int | None) -> Report:
    """The tool's verdict from the tail of the job's output. A count of errors is believed
    wherever it stands (a submission faking one only hurts itself); "0 errors" only as the
    last line of a run that ended normally, since the submission could print that line
    and then kill the tool."""
    summaries = _SUMMARY.findall(output) or _RACE_SUMMARY.findall(output)
    findings = _FINDING.findall(output)[:PRINT_LIMIT]
    errors = int(summaries[-1]) if summaries else None
    if errors == 0:
        lines = output.strip().splitlines()
        last = lines[-1] if lines else ""
        if returncode != 0 or not (_SUMMARY.match(last) or _RACE_SUMMARY.match(last)):
            errors = None
    return Report(tool, errors, findings)
