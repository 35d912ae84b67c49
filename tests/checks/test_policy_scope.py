"""Which of a module's functions the graded one reaches (grader/checks/policy/scope.py):
Part 3's scatter item fails another communicator only within scatter_batch's reach."""

from pathlib import Path

import pytest

from grader.checks.anticheat import policy_verdict
from grader.checks.policy.scope import unreached_lines

MODULE = '''from mpi4py import MPI

WORLD_SIZE = 4


def _world():
    return MPI.COMM_WORLD


alias = _world


class Helper:
    def size(self):
        return 1


def scatter_batch(comm, X, labels, root=0):
    if comm.Get_size() == WORLD_SIZE:
        return alias().bcast(X, root=root), labels
    return X, labels


def allreduce_gradients(comm=MPI.COMM_WORLD, grads=(), n_local=0, n_total=1):
    return list(grads)


def averaging(comm):
    return Helper().size()


if __name__ == "__main__":
    print(MPI.COMM_WORLD.Get_rank())
'''


def _lines_of(text: str, first: str, last: str) -> set[int]:
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines, 1) if line.startswith(first))
    end = next(n for n, line in enumerate(lines, 1) if n > start and line.startswith(last))
    return set(range(start, end + 1))


def test_reach_follows_names_through_aliases_and_leaves_the_other_functions(tmp_path: Path):
    (tmp_path / "mpi_1_data_parallel.py").write_text(MODULE)
    unreached = unreached_lines(tmp_path, "mpi_1_data_parallel", "scatter_batch")
    # _world is reached through the module-level alias; a class always (its body runs
    # at import)
    assert not unreached & _lines_of(MODULE, "def _world", "    return MPI")
    assert not unreached & _lines_of(MODULE, "class Helper", "        return 1")
    assert _lines_of(MODULE, "def allreduce_gradients", "    return list") <= unreached
    assert not unreached & _lines_of(MODULE, "def scatter_batch", "    return X, labels")


def test_the_scatter_item_fails_a_communicator_in_reach_and_notes_one_elsewhere(tmp_path):
    (tmp_path / "mpi_1_data_parallel.py").write_text(MODULE)
    lines = unreached_lines(tmp_path, "mpi_1_data_parallel", "scatter_batch")
    notes = frozenset({"mpi-comm"})
    scatter = policy_verdict(tmp_path, "mpi_1_data_parallel", "mpi", "enforce", notes, lines)
    assert "COMM_WORLD" in scatter.failure and "line 7" in scatter.failure
    assert "line 25" not in scatter.failure  # allreduce_gradients' default: a note
    other = policy_verdict(tmp_path, "mpi_1_data_parallel", "mpi", "enforce", notes)
    assert other.failure == "" and "COMM_WORLD" in other.note


def test_nothing_is_let_off_when_the_module_cannot_be_read_or_bound_twice(tmp_path):
    assert unreached_lines(tmp_path, "missing", "scatter_batch") == frozenset()
    (tmp_path / "m.py").write_text("def scatter_batch():\n    pass\n\n\ndef scatter_batch():\n"
                                   "    pass\n\n\ndef other():\n    pass\n")
    assert unreached_lines(tmp_path, "m", "scatter_batch") == frozenset()
    (tmp_path / "n.py").write_text("def other(:\n")
    assert unreached_lines(tmp_path, "n", "scatter_batch") == frozenset()


RING = '''import numpy as np
from mpi4py import MPI


def _send_left(comm, x):
    comm.Send(x, dest=(comm.Get_rank() - 1) % comm.Get_size())


def ring_allreduce(comm, buffer):
    _send_left(comm, buffer)


def main():
    world = MPI.COMM_WORLD
    x = np.ones(4, np.float32)
    ring_allreduce(world, x)
    world.Allreduce(MPI.IN_PLACE, x)


if __name__ == "__main__":
    main()
'''


def test_a_ring_demo_only_the_main_block_calls_is_a_note_and_a_helper_in_reach_fails(tmp_path):
    from grader.parts.mpi import RING_FUNCTION, RING_NOTES

    (tmp_path / "mpi_2_ring.py").write_text(RING)
    lines = unreached_lines(tmp_path, "mpi_2_ring", RING_FUNCTION)
    verdict = policy_verdict(tmp_path, "mpi_2_ring", "mpi", "enforce", RING_NOTES, lines)
    assert verdict.failure == "" and "COMM_WORLD" in verdict.note and "Allreduce" in verdict.note
    # the same world reached from ring_allreduce, through its helper: the item fails
    cheat = RING.replace("    comm.Send(x, dest=", "    MPI.COMM_WORLD.Send(x, dest=")
    (tmp_path / "mpi_2_ring.py").write_text(cheat)
    lines = unreached_lines(tmp_path, "mpi_2_ring", RING_FUNCTION)
    verdict = policy_verdict(tmp_path, "mpi_2_ring", "mpi", "enforce", RING_NOTES, lines)
    assert "COMM_WORLD" in verdict.failure and "line 6" in verdict.failure


# A red team's (round six): routes to a function that name nothing in scatter_batch.
ROUTES = {
    "a decorator registers it": ("HOOKS = []\n\n\n@HOOKS.append\ndef spread(x):\n"
                                 "    return MPI.COMM_WORLD\n\n\n"
                                 "def scatter_batch(comm, X, labels, root=0):\n"
                                 "    return HOOKS[0](X)\n"),
    "a default value registers it": ("HOOKS = []\n\n\ndef spread(x):\n    return MPI.COMM_WORLD"
                                     "\n\n\ndef other(f=HOOKS.append(spread)):\n    pass\n\n\n"
                                     "def scatter_batch(comm, X, labels, root=0):\n"
                                     "    return HOOKS[0](X)\n"),
    "the module imports itself": ("import mpi_1_data_parallel as here\n\n\ndef spread(x):\n"
                                  "    return MPI.COMM_WORLD\n\n\n"
                                  "def scatter_batch(comm, X, labels, root=0):\n"
                                  "    return here.spread(X)\n"),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_functions_reached_without_their_name_are_not_let_off(tmp_path, route):
    (tmp_path / "mpi_1_data_parallel.py").write_text("from mpi4py import MPI\n\n"
                                                     + ROUTES[route])
    lines = unreached_lines(tmp_path, "mpi_1_data_parallel", "scatter_batch")
    verdict = policy_verdict(tmp_path, "mpi_1_data_parallel", "mpi", "enforce",
                             frozenset({"mpi-comm"}), lines)
    assert "COMM_WORLD" in verdict.failure


def test_what_siblings_that_can_run_import_from_the_module_is_reached(tmp_path):
    """Only modules the graded one imports (transitively) run beside it: a student's test
    script that imports it changes nothing (alternatives round six); an imported sibling
    that takes a function by name reaches it, and one that takes the module itself lets
    nothing off."""
    module = MODULE.replace("from mpi4py import MPI\n",
                            "from mpi4py import MPI\n\nimport helpers\n")
    (tmp_path / "mpi_1_data_parallel.py").write_text(module)
    (tmp_path / "test_mine.py").write_text("import mpi_1_data_parallel as dp\n")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    unreached = unreached_lines(tmp_path, "mpi_1_data_parallel", "scatter_batch")
    allreduce = _lines_of(module, "def allreduce_gradients", "    return list")
    assert allreduce <= unreached
    (tmp_path / "helpers.py").write_text("from mpi_1_data_parallel import allreduce_gradients\n")
    unreached = unreached_lines(tmp_path, "mpi_1_data_parallel", "scatter_batch")
    assert unreached and not allreduce & unreached
    (tmp_path / "helpers.py").write_text("from . import mpi_1_data_parallel\n")
    assert unreached_lines(tmp_path, "mpi_1_data_parallel", "scatter_batch") == frozenset()
