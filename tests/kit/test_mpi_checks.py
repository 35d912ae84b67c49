"""nnkit.mpi_checks, the visible Part 3 checks of `make test`: the solution passes, and a
planted bug in each exchange fails with a message naming what is wrong."""

import shutil
import subprocess
import sys

import pytest

from nnkit.collectives import find_mpiexec, mpiexec_command, rank_environment
from nnkit.submission import NAMED
from tests.conftest import KIT_ROOT

pytestmark = pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec")

BUGS = {  # function -> (text of the solution, its replacement, what the check says)
    "allreduce_gradients": ("scale = np.float32(n_local / n_total)", "scale = np.float32(1.0)",
                            "the shares-weighted sum"),
    "scatter_batch": ("offsets = [sum(counts[:r]) for r in range(size)]",
                      "offsets = [sum(counts[:r + 1]) % n for r in range(size)]",
                      "not rows"),
    "ring_allreduce": ("recv += got", "recv[...] = got", "expected"),
}


def _run(folder, ranks, *functions):
    command = [*mpiexec_command(ranks), sys.executable, "-m", "nnkit.mpi_checks", "--impl",
               str(folder), *functions]
    return subprocess.run(command, cwd=KIT_ROOT, env=rank_environment(polite=True),
                          capture_output=True, text=True, timeout=240)


def test_the_solution_passes_on_three_ranks():
    done = _run(NAMED["solution"], 3)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.count(": ok") == 5


@pytest.mark.parametrize("function", sorted(BUGS))
def test_a_planted_bug_fails(tmp_path, function):
    old, new, said = BUGS[function]
    folder = tmp_path / "sub"
    shutil.copytree(NAMED["solution"], folder)
    for path in folder.glob("mpi_*.py"):
        text = path.read_text()
        if old in text:
            path.write_text(text.replace(old, new))
            break
    else:
        raise AssertionError(f"{old!r} is not in the solution any more")
    done = _run(folder, 3, function)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert f"{function} on 3 rank(s): FAILED" in done.stdout and said in done.stdout
