"""Differently written correct submissions (tests/policy/alt_*), graded in the simulator:
each keeps every point the simulator grades, in every part it writes.

test_policy.py checks the same folders against the static policy only; here the whole
grader runs them (worker, guard, launch replay, race checker, MPI jobs), which is where
an unusual but correct submission can still lose points. A folder holds the modules of
the parts it exercises; the others are the solution's. A folder that writes the network
is graded with Part 3 too, since `mpi.combined` trains that network under MPI.

`make test` grades QUICK, one alternative (the guard's fixes for the standard library
and pickled NumPy data have their own quick test, tests/worker/test_guard_stdlib.py); the
rest are marked slow (`make test-all`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from grader.scoring import DEFAULT_CONFIG
from nnkit.collectives import find_mpiexec
from tests.conftest import KIT_ROOT, TESTS, run_kit, selected_values

FIXTURES = TESTS / "policy"
FOLDERS = sorted(p.name for p in FIXTURES.glob("alt_*") if p.is_dir())
# Notebook submissions (one part each, graded as the course's autograde extracts them):
# built from alt_gemm_rowx and alt_net_class with the hidden tests removed as nbgrader
# releases them, a scratch cell that calls NumPy's matmul (never graded) and one cell
# whose "nnkit" tag an editor dropped (recognised by its id).
NOTEBOOKS = {"alt_gemm_notebook": ("gemm",), "alt_net_notebook": ("net",)}
NAMES = FOLDERS + sorted(NOTEBOOKS)
MODULES = {"gemm": ("gemm_1_naive", "gemm_2_shared", "gemm_3_register"),
           "net": ("net_1_kernels", "net_2_backprop"),
           "mpi": ("mpi_1_data_parallel", "mpi_2_ring")}
# NumPy data through mpi4py's pickled calls, which the guard refused to unpickle.
QUICK = {"alt_mpi_point_to_point"}
# Uids of this module's jobs (test_cheats.py and test_cheats_mpi.py use those below).
UID_FIRST = 150000 + os.getpid() % 10000 * 4


def _parts(folder: Path) -> tuple[str, ...]:
    if folder.name in NOTEBOOKS:
        return NOTEBOOKS[folder.name]
    own = {part for part, modules in MODULES.items()
           if any((folder / f"{m}.py").is_file() for m in modules)}
    if "net" in own:
        own.add("mpi")
    return tuple(part for part in MODULES if part in own)


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
    for name in names:
        parts = _parts(FIXTURES / name)
        if name in NOTEBOOKS:
            (tmp / "subs").mkdir(exist_ok=True)
            path = shutil.copy(FIXTURES / "notebooks" / f"{name}.ipynb", tmp / "subs")
            groups.setdefault(parts, []).append(Path(path))
            continue
        folder = shutil.copytree(FIXTURES / name, tmp / "subs" / name)
        for module in (KIT_ROOT / "solution").glob("*.py"):
            if not (folder / module.name).exists():
                shutil.copy(module, folder / module.name)
        groups.setdefault(parts, []).append(folder)
    reports = {}
    for parts, folders in groups.items():
        if "mpi" in parts and find_mpiexec() is None:
            pytest.skip("no mpiexec")
        out = tmp / ("out-" + "-".join(parts))
        result = run_kit("grader", *map(str, folders), "--parts", ",".join(parts),
                         "--seed", "1", "--jobs", "2", "--config", str(tmp / "config.toml"),
                         "--out", str(out))
        assert result.returncode == 0, result.stderr[-3000:]
        for folder in folders:
            reports[folder.stem] = json.loads((out / f"{folder.stem}.json").read_text())
    return reports


def test_every_alternative_writes_a_graded_part():
    assert len(NAMES) >= 12
    assert all(_parts(FIXTURES / name) for name in NAMES)
    assert all((FIXTURES / "notebooks" / f"{name}.ipynb").is_file() for name in NOTEBOOKS)
    assert QUICK <= set(NAMES)


@pytest.mark.parametrize("name", _sweep())
def test_a_correct_alternative_keeps_every_point(graded, name):
    parts = _parts(FIXTURES / name)
    items = [i for i in graded[name]["items"] if i["id"].split(".")[0] in parts]
    graded_items = [i for i in items if i["status"] != "not graded"]
    assert graded_items, "nothing was graded"
    # Every correctness item of each part is graded in the simulator; speed needs a GPU.
    assert {i["id"].split(".")[0] for i in graded_items} == set(parts)
    lost = [(i["id"], i["points"], i["max_points"], i["message"][:400])
            for i in graded_items if i["points"] != i["max_points"]]
    assert not lost, lost
