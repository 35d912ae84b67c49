"""A "ring" made of collectives, directly and through a helper module."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np
from mpi4py import MPI

from .ring_util import chunk_sum, plain_helper


def chunk_bounds(length, parts):
    return list(range(parts + 1))


def ring_allreduce(comm, buffer):
    comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)  # expect: mpi-collective
    parts = comm.allgather(buffer)  # expect: mpi-collective
    MPI.COMM_WORLD.Allgather(buffer, parts)  # expect: mpi-comm
    request = comm.Iallreduce(MPI.IN_PLACE, buffer)  # expect: mpi-collective
    chunk_sum(comm, buffer)
    plain_helper(comm)
    comm.Barrier()
    np.add.reduce(buffer)
    sent = comm.Isend(buffer, dest=0)
    MPI.Request.Free(sent)  # expect: mpi-request
    request.Wait()
