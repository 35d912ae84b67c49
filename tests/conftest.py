"""Shared test helpers. Tests run on the CPU (CUDA simulator) unless a GPU is present;
tests marked `gpu` are skipped without one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KIT_ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    from nnkit.backend import probe_gpu

    usable, why = probe_gpu()
    if usable:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_kit(*args: str, env: dict | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
    """Run `python -m ...` from the kit root in a fresh interpreter."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", *args], cwd=KIT_ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
