"""Grading a class in shards (MPI ranks or a Slurm job array), then merging."""

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course.distributed import share
from nnkit.submission import NAMED
from tests.conftest import KIT_ROOT, run_kit

FAST = ["--parts", "gemm", "--kernels", "naive", "--jobs", "1"]


def _mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


@pytest.fixture(scope="module")
def class_of_three(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    for name, source in (("alice", "solution"), ("bob", "starter"), ("carol", "solution")):
        shutil.copytree(NAMED[source], root / name)
    return [str(root / n) for n in ("alice", "bob", "carol")]


def _rows(path: Path) -> dict[str, dict]:
    return {r["submission"]: r for r in csv.DictReader(open(path))}


def test_shares_cover_the_class_once():
    names = [f"s{i:03d}" for i in range(10)]
    shares = [share(names, k, 3) for k in range(3)]
    assert sorted(sum(shares, [])) == names and [len(s) for s in shares] == [4, 3, 3]
    with pytest.raises(ValueError):
        share(names, 3, 3)


@pytest.mark.slow
def test_job_array_shards_then_merge(class_of_three, tmp_path):
    out = tmp_path / "grades"
    for k in range(2):
        result = run_kit("grader.course.distributed", "--shard", str(k), "--shards", "2",
                         *class_of_three, *FAST, "--out", str(out))
        assert result.returncode == 0, result.stderr[-2000:]
    assert run_kit("grader.course.distributed", "--merge", str(out)).returncode == 0
    rows = _rows(out / "grades.csv")
    assert set(rows) == {"alice", "bob", "carol"}
    assert rows["alice"]["total"] == rows["carol"]["total"] == "10"
    assert rows["bob"]["total"] == "0"
    assert (out / "feedback" / "summary.html").exists()


@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec")
def test_mpi_ranks_share_the_class(class_of_three, tmp_path):
    out = tmp_path / "grades"
    result = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m",
                             "grader.course.distributed",
                             *class_of_three, *FAST, "--out", str(out)], cwd=KIT_ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(list((out / "shard-0").glob("*.json"))) == 2
    assert len(list((out / "shard-1").glob("*.json"))) == 1
    rows = _rows(out / "grades.csv")
    assert {r: rows[r]["total"] for r in rows} == {"alice": "10", "bob": "0", "carol": "10"}
