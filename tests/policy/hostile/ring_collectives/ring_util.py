"""Helpers: the first two do the ring's work with collectives."""

# ruff: noqa (hostile code, written to be refused)


def chunk_sum(comm, buffer):
    comm.Reduce_scatter_block(buffer, buffer)  # expect: mpi-collective
    return _inner(comm, buffer)


def _inner(comm, buffer):
    return comm.bcast(buffer)  # expect: mpi-collective


def plain_helper(comm):
    return comm.Get_rank()


def unused(comm, buffer):
    comm.Allreduce(buffer, buffer)
