"""Differently written correct submissions (tests/policy/alt_* and the notebooks in
tests/policy/notebooks), graded in the simulator: each keeps every point the simulator
grades, in every part it writes.

test_policy.py checks the same folders against the static policy only; here the whole
grader runs them (worker, guard, launch replay, race checker, MPI jobs), which is where
an unusual but correct submission can still lose points. A folder holds the modules of
the parts it exercises; the others are the solution's (tests/policy/grade_alternatives.py
stages them, and grades them on a GPU as well). A folder that writes the network is
graded with Part 3 too, since `mpi.combined` trains that network under MPI.

`make test` grades QUICK, one alternative (the guard's fixes for the standard library
and pickled NumPy data have their own quick test, tests/worker/test_guard_stdlib.py); the
rest are marked slow (`make test-all`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grader.scoring import DEFAULT_CONFIG
from nnkit.collectives import find_mpiexec
from tests.conftest import TESTS, run_kit, selected_values
from tests.policy import grade_alternatives as alternatives

NAMES = alternatives.names()
# NumPy data through mpi4py's pickled calls, which the guard refused to unpickle.
QUICK = {"alt_mpi_point_to_point"}
# Uids of this module's jobs (test_cheats.py and test_cheats_mpi.py use those below).
UID_FIRST = 150000 + os.getpid() % 10000 * 4


def _sweep() -> list:
    return [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in NAMES]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request) -> dict[str, dict]:
    names = [n for n in NAMES if n in selected_values(request, "name")]
    tmp = tmp_path_factory.mktemp("alternatives")
    config = DEFAULT_CONFIG.read_text()
    for old, new in (("uid_first = 64000", f"uid_first = {UID_FIRST}"),
                     ("uid_count = 64", "uid_count = 4")):
        assert old in config
        config = config.replace(old, new)
    (tmp / "config.toml").write_text(config)
    groups: dict[tuple[str, ...], list[Path]] = {}
    for name in names:  # one grading run per set of parts
        groups.setdefault(alternatives.parts_of(name), []).append(
            alternatives.stage(name, tmp / "subs"))
    reports = {}
    for parts, subs in groups.items():
        if "mpi" in parts and find_mpiexec() is None:
            pytest.skip("no mpiexec")
        out = tmp / ("out-" + "-".join(parts))
        result = run_kit("grader", *map(str, subs), "--parts", ",".join(parts),
                         "--seed", "1", "--jobs", "2", "--config", str(tmp / "config.toml"),
                         "--out", str(out))
        assert result.returncode == 0, result.stderr[-3000:]
        for sub in subs:
            reports[sub.stem] = json.loads((out / f"{sub.stem}.json").read_text())
    return reports


def test_there_are_enough_alternatives_of_every_part():
    assert len(NAMES) >= 16 and QUICK <= set(NAMES)
    written = [alternatives.parts_of(name) for name in NAMES]
    assert all(written) and {p for parts in written for p in parts} == {"gemm", "net", "mpi"}
    assert all((TESTS / "policy" / "notebooks" / f"{name}.ipynb").is_file()
               for name in alternatives.NOTEBOOK_PARTS)


@pytest.mark.parametrize("name", _sweep())
def test_a_correct_alternative_keeps_every_point(graded, name):
    parts = alternatives.parts_of(name)
    graded_items = [i for i in graded[name]["items"]
                    if i["id"].split(".")[0] in parts and i["status"] != "not graded"]
    # Every correctness item of each part is graded in the simulator; speed needs a GPU.
    assert {i["id"].split(".")[0] for i in graded_items} == set(parts)
    lost = alternatives.lost_points(graded[name], parts)
    assert not lost, lost
