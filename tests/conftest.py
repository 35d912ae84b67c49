"""Shared test helpers. Tests run on the CPU (CUDA simulator) unless a GPU is present;
tests marked `gpu` are skipped without one. Every test of a part's files carries that
part's marker (`pytest -m gemm`, `-m net`, `-m mpi`); `make test` leaves out the ones
marked `slow`, `make test-all` runs them too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KIT_ROOT = Path(__file__).resolve().parents[1]
TESTS = KIT_ROOT / "tests"  # the test data folders (bugs/, cheats/, golden/, ...)


# The part each test file exercises (files of the grader's machinery, shared by all
# three parts, carry none).
PART_OF_FILE = {
    "test_gemm_kernels.py": "gemm", "test_gemm_reference.py": "gemm",
    "test_gemm_checks.py": "gemm", "test_simcheck.py": "gemm", "test_cheats.py": "gemm",
    "test_sanitizer.py": "gemm", "test_fastlaunch.py": "gemm", "test_memcount.py": "gemm",
    "test_simperf.py": "gemm",
    "test_network.py": "net", "test_net_solution.py": "net", "test_mnist.py": "net",
    "test_train_cli.py": "net", "test_paper.py": "net", "test_paper_bench.py": "net",
    "test_leapfrog.py": "net",
    "test_mpi.py": "mpi", "test_mpi_grader.py": "mpi", "test_cheats_mpi.py": "mpi",
    "test_mpi_combined.py": "mpi",
}


def pytest_collection_modifyitems(config, items):
    from nnkit.backend import probe_gpu

    for item in items:
        part = PART_OF_FILE.get(item.path.name)
        if part:
            item.add_marker(getattr(pytest.mark, part))
    usable, why = probe_gpu()
    if usable:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# As the test run began: nnkit.backend.select(), which some tests call in this process,
# sets it, and a fresh interpreter must choose its backend as a user's would (the golden
# reports name the reason the simulator was chosen).
SIMULATOR_SWITCH = "NUMBA_ENABLE_CUDASIM"
_SWITCH_AT_START = os.environ.get(SIMULATOR_SWITCH)


def run_kit(*args: str, env: dict | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
    """Run `python -m ...` from the kit root in a fresh interpreter."""
    full_env = {k: v for k, v in os.environ.items() if k != SIMULATOR_SWITCH}
    if _SWITCH_AT_START is not None:
        full_env[SIMULATOR_SWITCH] = _SWITCH_AT_START
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", *args], cwd=KIT_ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)



def selected_values(request: pytest.FixtureRequest, param: str) -> set:
    """The values of parameter `param` among the tests of the requesting module that this
    session runs (after -m and -k): a module fixture that grades one submission per
    value then grades only those."""
    values = set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if item.module is request.module and callspec is not None and param in callspec.params:
            values.add(callspec.params[param])
    return values


def selected_names(request: pytest.FixtureRequest) -> set[str]:
    """The names of this module's tests that this session runs."""
    return {item.originalname for item in request.session.items
            if item.module is request.module}
