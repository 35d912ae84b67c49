"""Part 3 functions that take the reference bodies, rebuild other ranks' inputs from the
grader's case builders, or escape the counting communicator."""

# ruff: noqa (hostile code, written to be refused)

import grader.cases.mpi as cases  # expect: import
import mpi4py  # expect: import
import nnkit  # expect: import
from grader.cases import mpi as mpi_cases  # expect: import
from mpi4py import MPI
from nnkit.collectives import allreduce_gradients, scatter_batch  # expect: import


def shard_counts(n, size):
    return cases.split(n, size) or mpi_cases or nnkit or mpi4py


def spy(comm, buffer):
    world = MPI.COMM_WORLD  # expect: mpi-comm
    duplicate = comm.Dup()  # expect: mpi-comm
    half = comm.Split(0, 0)  # expect: mpi-comm
    inner = comm._comm  # expect: private
    handle = comm.py2f()  # expect: mpi-comm
    other = MPI.Comm.f2py(handle)  # expect: mpi-comm
    same = getattr(comm, "Dup")()  # expect: builtin
    memory = MPI.memory.fromaddress(0, 8)  # expect: memory
    data = MPI.pickle.loads(b"")  # expect: memory
    group = comm.Create_group(comm.Get_group())  # expect: mpi-comm
    comm.Abort(1)  # expect: mpi-abort
    gathered = comm.allgather(buffer)
    return (world, duplicate, half, inner, other, same, memory, data, group, gathered,
            allreduce_gradients, scatter_batch)


def forge(comm):
    comm.bytes_sent = 0  # expect: module-assign
    comm.calls.clear()  # expect: mpi-tally
    comm.settings["x"] = 1  # expect: module-assign
