"""`nnkit mpirun`, the launcher behind `make train-mpi`: with an Open MPI mpiexec, run as
root, the command carries --allow-run-as-root (without it Open MPI refuses to start), and
a number of ranks that is not 1 or more is refused, by make and by the launcher."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nnkit import mpirun
from tests.conftest import KIT_ROOT

OPEN_MPI = "mpiexec (Open MPI) 5.0.3"
MPICH = "HYDRA build details:"


def _fake_mpiexec(folder: Path, version: str) -> Path:
    """An mpiexec that prints `version` for --version and otherwise echoes its arguments."""
    fake = folder / "mpiexec"
    fake.write_text("#!/bin/sh\n"
                    f"if [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\n"
                    "echo \"launched: $*\"\n")
    fake.chmod(0o755)
    return fake


def test_open_mpi_as_root_gets_the_root_flag(tmp_path, monkeypatch):
    fake = _fake_mpiexec(tmp_path, OPEN_MPI)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    command = mpirun.launch_command(2, ["python", "-m", "nnkit", "train"], str(fake))
    assert command[:3] == [str(fake), "-n", "2"]
    assert "--allow-run-as-root" in command and "--oversubscribe" in command
    # the flags belong to mpiexec: they come before the program every rank runs
    assert command.index("--allow-run-as-root") < command.index("python")
    assert command[-4:] == ["python", "-m", "nnkit", "train"]


def test_open_mpi_as_a_user_and_mpich_get_no_root_flag(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "--allow-run-as-root" not in mpirun.launch_command(
        2, ["true"], str(_fake_mpiexec(tmp_path, OPEN_MPI)))
    mpich = tmp_path / "mpich"
    mpich.mkdir()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert mpirun.launch_command(3, ["true"], str(_fake_mpiexec(mpich, MPICH))) == \
        [str(mpich / "mpiexec"), "-n", "3", "true"]


@pytest.mark.parametrize("text", ["0", "", "-1", "two", "1.5", "00"])
def test_ranks_must_be_one_or_more(text):
    with pytest.raises(ValueError, match="NP must be a number of ranks"):
        mpirun.parse_ranks(text)
    assert mpirun.parse_ranks("4") == 4


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnkit", "mpirun", *argv], cwd=KIT_ROOT,
                          capture_output=True, text=True, timeout=60)


def test_the_command_line_runs_the_launcher(tmp_path):
    """End to end: the launcher is exec'd with the program after `--`; NP=0 is refused
    before anything starts."""
    fake = _fake_mpiexec(tmp_path, OPEN_MPI)
    done = _run(["-n", "2", "--mpiexec", str(fake), "--", "prog", "--flag"])
    assert done.returncode == 0, done.stderr
    launched = done.stdout.strip()
    assert launched.startswith("launched: -n 2 --oversubscribe") and \
        launched.endswith("prog --flag")
    assert ("--allow-run-as-root" in launched) == (os.geteuid() == 0)
    refused = _run(["-n", "0", "--mpiexec", str(fake), "--", "prog"])
    assert refused.returncode == 2 and "NP must be a number of ranks" in refused.stderr
    assert "launched" not in refused.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("makefile", ["Makefile", "grader/student_files/Makefile"])
def test_make_train_mpi_goes_through_the_launcher(tmp_path, makefile):
    """Both Makefiles, run for real with an Open MPI mpiexec that only echoes: the job
    starts through `nnkit mpirun` with NP and the chosen MPIEXEC, gets Open MPI's flags
    (as root, --allow-run-as-root), and NP=0 still stops make with its message."""
    fake = _fake_mpiexec(tmp_path, OPEN_MPI)
    path = KIT_ROOT / makefile
    done = subprocess.run(["make", "-f", str(path), "train-mpi", "NP=3", f"PY={sys.executable}",
                           f"MPIEXEC={fake}", "IMPL=reference"], cwd=KIT_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"{sys.executable} -m nnkit mpirun -n 3 --mpiexec {fake} --" in \
        " ".join(done.stdout.replace("\\\n", " ").split())
    launched = [line for line in done.stdout.splitlines() if line.startswith("launched:")]
    assert len(launched) == 1 and launched[0].startswith("launched: -n 3 --oversubscribe")
    assert launched[0].endswith(f"{sys.executable} -m nnkit train --mpi --impl reference")
    assert ("--allow-run-as-root" in launched[0]) == (os.geteuid() == 0)
    refused = subprocess.run(["make", "-f", str(path), "train-mpi", "NP=0",
                              f"PY={sys.executable}"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode != 0 and "NP must be a number of ranks" in refused.stderr
