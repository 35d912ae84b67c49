"""Part 3 submissions that cheat (tests/cheats_mpi/, described in its README), graded in one
run beside the solution and correct alternatives: each cheat earns nothing on the item it
cheats in, with a message saying what happened, and keeps the points of the items it
does not touch (its other module is the solution's); the solution and the alternatives
(an Isend/Irecv ring, a Sendrecv ring with explicit counts, a pickled ring, Scatterv with
mpi4py's [buf, (counts, displs), type] spec) get every point."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from grader.cases import mpi as mpi_cases
from grader.cases import mpi_combined
from grader.scoring import DEFAULT_CONFIG
from nnkit.collectives import find_mpiexec
from tests.conftest import KIT_ROOT, TESTS, run_kit, selected_values
from tests.trust.test_cheats import _procs_of_uids

CHEATS = TESTS / "cheats_mpi"
NAMES = sorted(p.name for p in CHEATS.iterdir() if p.is_dir())
MODULES = ("mpi_1_data_parallel.py", "mpi_2_ring.py")
NETWORK = ("net_1_kernels.py", "net_2_backprop.py")  # the solution's, for mpi.combined
LIMIT = 40  # seconds per MPI job: the solution's take 2-4 s, more on a busy 2-core machine
# Uids of this test's jobs only (test_cheats.py uses the range below this one).
UID_FIRST = 110000 + os.getpid() % 10000 * 4
ALL = set(mpi_cases.ITEMS) | {mpi_combined.ITEM}

# Each cheat: the items it must lose, and a fragment (a regular expression) of each
# item's message. Every other item keeps its points.
EXPECTED = {
    "reexport_twins": {item: "NotImplementedError" for item in ALL},
    "import_case_builders": {"mpi.ring": "imported a module graded code may not use"},
    "rebuild_from_seeds": {"mpi.ring": "outside the float32 bound"},
    "ring_relay": {"mpi.ring": r"moves about 2\(p-1\)/p of the buffer"},
    "ring_float32_relay": {"mpi.ring": r"moves about 2\(p-1\)/p of the buffer"},
    "ring_pickle_tally": {"mpi.ring": "sent a pickle that names a function or class to call"},
    # (its module imports nnkit.dataset: the policy fails every item that reads it)
    "rebuild_training_rows": {"mpi.scatter": "cases fail",
                              "mpi.allreduce": "from nnkit import dataset",
                              "mpi.data_parallel": "relative max-norm",
                              "mpi.averaging": "relative max-norm",
                              "mpi.combined": "rank"},
    "scatter_broadcast": {"mpi.scatter": "not the whole minibatch to every rank"},
    "scatter_idup": {"mpi.scatter": "not the whole minibatch to every rank"},
    "merged_state": {"mpi.allreduce": "outside the float32 bound"},
    # (the world is refused at run time too: the items that scatter on 4 ranks fail)
    "scatter_world": {"mpi.scatter": "the source breaks the rules.*COMM_WORLD",
                      "mpi.data_parallel": "COMM_WORLD", "mpi.averaging": "COMM_WORLD",
                      "mpi.combined": "COMM_WORLD"},
    "combined_host_sgd": {"mpi.combined": "launched none of your kernels"},
    "combined_empty_kernel": {"mpi.combined": "not what the kernels the call launched compute"},
    "combined_broadcast": {"mpi.scatter": "expected", "mpi.allreduce": "outside the float32",
                           "mpi.data_parallel": "rows between them",
                           "mpi.averaging": "rows between them",
                           "mpi.combined": "rows between them"},
    "root_keeps_rows": {"mpi.scatter": "expected",
                        "mpi.data_parallel": "an even split of every minibatch",
                        "mpi.averaging": "an even split of every minibatch",
                        "mpi.combined": "an even split of every minibatch"},
    "no_communication": {"mpi.allreduce": "outside the float32 bound",
                         "mpi.data_parallel": "relative max-norm",
                         "mpi.averaging": "relative max-norm",
                         "mpi.combined": "a Part 3 problem"},
    "read_other_rank": {"mpi.ring": "opened a file outside its folder.*inputs.npz"},
    "ring_forged_count": {"mpi.ring": "comm.Sendrecv: a value of type Count"},
    "ring_forged_dest": {"mpi.ring": "comm.Sendrecv: a value of type (Count|Rank)"},
    "scatter_forged_count": {"mpi.scatter": "comm.Bcast: a value of type Count"},
    "ring_dup": {"mpi.ring": "comm.Dup: the ring item allows point-to-point messages only"},
    "ring_allgather": {"mpi.ring": "comm.Allgather: the ring item allows point-to-point"},
    "ring_bcast": {"mpi.ring": "comm.bcast: the ring item allows point-to-point"},
    "ring_world": {"mpi.ring": "never MPI.COMM_WORLD"},
    # MPICH's handle: the byte count catches it; under another MPI (Open MPI on the GPU
    # image) the handle names no communicator and the call fails.
    "ring_world_handle": {"mpi.ring": "on 4 rank.*(sent 0 bytes.*must move at least|"
                                      "MPI_ERR_COMM: invalid communicator)"},
    "ring_sends_nothing": {"mpi.ring": "outside the float32 bound"},
    # On 3 ranks (all neighbours) rank 0 moves more than a ring; on 4, it talks to rank 2.
    "ring_star": {"mpi.ring": r"on 3 rank.*moves about 2\(p-1\)/p of the buffer|"
                              "on 4 rank.*the ring must pass data between neighbours only"},
    "forge_results": {"mpi.ring": "opened a file outside its folder.*/out/case-0-rank-0"},
    "forge_by_rename": {"mpi.ring": "moved a file into or out of its folder"},
    # Hydra kills the other ranks, or lets them wait for the one gone until the limit.
    "exit_early": {"mpi.ring": "on 4 rank.*(stopped early|ended with status|did not "
                               "complete|time limit)"},
    "kill_other_rank": {"mpi.ring": "sent a signal to a process"},
    # (the other rank's folder shows as its last two parts: …/tmp/ring-<n>-<rank>-<step>)
    "file_channel": {"mpi.ring": "opened a file outside its folder.*tmp/ring-\\d"},
    "closure_snoop": {"mpi.ring": "no communicator found behind the wrapper"},
    "tamper_count": {"mpi.ring": "changed the kit.*nnkit.collectives.message_bytes"},
    "patch_worker": {"mpi.ring": "changed the kit.*grader.worker.mpi.np"},
}
HONEST = [n for n in NAMES if n.startswith("ok_")]
# What `make test` grades, one per defence: the audit hook (forge_results), the module
# photograph (tamper_count), the ring's communicator rules (ring_allgather), its byte
# bound (ring_world_handle), its neighbour rule and upper byte bound (ring_star), signals
# (kill_other_rank), and one correct alternative (ok_ring_isend). The others are marked
# slow (`make test-all`); the fixture grades only the submissions the selected tests look
# at, and always the solution.
# The cheats of QUICK are graded on the ring item alone (`--function ring_allreduce`: one
# job each, not six); the others, in `make test-all`, on every item, which shows that a
# cheat in one item leaves the others alone.
QUICK = {"forge_results", "tamper_count", "ring_allgather", "ring_world_handle",
         "kill_other_rank", "ok_ring_isend", "ring_star"}


def _sweep(names: list[str]) -> list:
    """Submissions as parameters, those outside QUICK (and the solution) marked slow."""
    return [pytest.param(n, marks=() if n in QUICK | {"solution"} else pytest.mark.slow)
            for n in names]

pytestmark = pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    names = [n for n in NAMES if n in selected_values(request, "name")]
    tmp = tmp_path_factory.mktemp("cheats-mpi")
    out, subs = tmp / "out", tmp / "subs"
    solution = shutil.copytree(KIT_ROOT / "solution", subs / "solution")
    for name in names:
        folder = shutil.copytree(CHEATS / name, subs / name)
        for module in (*MODULES, *NETWORK):  # what it does not cheat in: the solution's
            if not (folder / module).exists():
                shutil.copy(solution / module, folder / module)
    config = DEFAULT_CONFIG.read_text()
    for old, new in (("\nseconds = 90\n", f"\nseconds = {LIMIT}\n"),
                     ("uid_first = 64000", f"uid_first = {UID_FIRST}"),
                     ("uid_count = 64", "uid_count = 4")):
        assert old in config
        config = config.replace(old, new)
    (tmp / "config.toml").write_text(config)
    ring_only = [n for n in names if n in QUICK and set(EXPECTED.get(n, ())) == {"mpi.ring"}]
    everything = [n for n in names if n not in ring_only]
    reports, stdout = {}, ""
    for group, narrow, folder in ((everything, [], out),
                                  (ring_only, ["--function", "ring_allreduce"], tmp / "ring")):
        paths = [str(subs / n) for n in group] + ([str(solution)] if folder is out else [])
        if not paths:
            continue
        result = run_kit("grader", *paths, "--parts", "mpi", *narrow, "--seed", "1",
                         "--jobs", "2", "--config", str(tmp / "config.toml"), "--out",
                         str(folder))
        assert result.returncode == 0, result.stderr[-3000:]
        stdout += result.stdout
        reports |= {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}
    leftovers = _procs_of_uids(UID_FIRST, 4)
    return {"reports": reports, "leftovers": leftovers, "stdout": stdout}


def _items(graded, name) -> dict[str, dict]:
    return {i["id"]: i for i in graded["reports"][name]["items"]}


def test_every_folder_is_expected():
    assert set(EXPECTED) | set(HONEST) == set(NAMES) and not set(EXPECTED) & set(HONEST)


@pytest.mark.parametrize("name", _sweep(["solution", *HONEST]))
def test_the_solution_and_correct_alternatives_keep_every_point(graded, name):
    items = _items(graded, name)
    assert set(items) == ALL
    for item in items.values():
        assert item["points"] == item["max_points"] > 0, (item["id"], item["message"])


@pytest.mark.parametrize("name", _sweep(sorted(EXPECTED)))
def test_every_cheat_loses_its_items_with_a_clear_message(graded, name):
    items = _items(graded, name)
    for item_id, item in items.items():
        if item_id in EXPECTED[name]:
            assert item["points"] == 0 and item["status"] == "fail", (item_id, item["message"])
            assert re.search(EXPECTED[name][item_id], item["message"]), item["message"]
        else:
            assert item["points"] == item["max_points"], (item_id, item["message"])


def test_the_ring_item_reports_the_bytes_each_rank_sent(graded):
    ring = _items(graded, "solution")["mpi.ring"]
    four = next(c for c in ring["checks"] if c["case"] == "100002 floats on 4 rank(s)")
    sent = [int(x) for x in re.search(r"bytes sent by rank ([\d/]+)", four["message"])
            .group(1).split("/")]
    # Every chunk but two leaves each rank (see mpi_checks.ring_bytes_needed).
    assert len(sent) == 4 and all(400008 <= b <= 2 * 400008 for b in sent), sent


def test_no_process_of_the_jobs_is_left(graded):
    assert not graded["leftovers"]
