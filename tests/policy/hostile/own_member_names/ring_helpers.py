"""A module-level value the ring imports that is code, not a constant: the whole module is
within the ring's reach."""

# ruff: noqa (hostile code, written to be refused)

from mpi4py import MPI

ALLREDUCE = lambda comm, b: comm.Allreduce(MPI.IN_PLACE, b)  # expect: mpi-collective
