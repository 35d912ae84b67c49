"""Quick visible checks of every function you write (`make test`).

Each test loads your function from starter/ (or from the folder in $NNKIT_IMPL) and runs
nnkit.checks on a few small cases; Part 3's functions run under mpiexec on 1, 2 and 3
ranks (nnkit.mpi_checks). Passing them is a first step: `make check` runs the
grader's full set, with tighter bounds and the race and index checker.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnkit.checks import MODULES, VISIBLE, check
from nnkit.submission import load_function

IMPL = Path(os.environ.get("NNKIT_IMPL", Path(__file__).resolve().parents[1] / "starter"))


@pytest.mark.parametrize("function", sorted(VISIBLE))
def test_visible_checks(function):
    check(function, load_function(IMPL, MODULES[function], function))


def _mpiexec() -> str | None:
    """The mpiexec beside this interpreter (the kit's MPICH wheel), else the PATH's."""
    from nnkit.collectives import find_mpiexec

    return find_mpiexec()


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_visible_mpi_checks(ranks):
    """Part 3's functions on `ranks` MPI ranks (nnkit.mpi_checks prints each check)."""
    from nnkit.collectives import mpiexec_command, rank_environment

    if _mpiexec() is None:
        pytest.skip("no mpiexec: install the kit's environment (make test does)")
    command = [*mpiexec_command(ranks), sys.executable, "-m", "nnkit.mpi_checks",
               "--impl", str(IMPL)]
    done = subprocess.run(command, env=rank_environment(polite=True), capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
