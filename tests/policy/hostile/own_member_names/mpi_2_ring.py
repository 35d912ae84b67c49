"""A class's own method names excuse a call only on the class's own objects: a dummy
class defining Allreduce does not make `comm.Allreduce` the submission's (review)."""

# ruff: noqa (hostile code, written to be refused)

from mpi4py import MPI

from ring_helpers import ALLREDUCE


class Ring:
    def Allreduce(self):
        return 0

    def eval(self):
        return 1


def ring_allreduce(comm, buffer):
    ring = Ring()
    ring.Allreduce()
    ring.eval()
    comm.Allreduce(MPI.IN_PLACE, buffer)  # expect: mpi-collective
    other = Ring()
    other = comm
    other.Allreduce(MPI.IN_PLACE, buffer)  # expect: mpi-collective
    comm.eval("1")  # expect: builtin
    ALLREDUCE(comm, buffer)
