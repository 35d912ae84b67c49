"""(A correct alternative: a lowercase comm.barrier() between the two phases, and the
student's own demo main() on MPI.COMM_WORLD, called only under the main guard, which
the grader never runs: alternatives round five.)

Part 3, a ring all-reduce written with point-to-point messages.

MPI's Allreduce hides how the sum travels. Here you write the bandwidth-optimal scheme
that NCCL and most MPI libraries use for large buffers. With p ranks in a ring (rank r
sends to r + 1 and receives from r - 1, modulo p) and the buffer cut into p chunks:

1. reduce-scatter, p - 1 steps: in each step every rank passes one chunk to the right
   and adds the chunk arriving from the left into its own copy. Afterwards each rank
   holds the complete sum of one chunk.
2. all-gather, p - 1 steps: every rank passes a completed chunk to the right, and
   overwrites its copy with the completed chunk arriving from the left.

Every rank sends 2 (p - 1) / p of the buffer in all, whatever p: the ring is limited by
the bandwidth of one link, not by the number of ranks.

Use only point-to-point calls of `comm` (Sendrecv, or Send/Recv/Isend/Irecv), never a
collective such as Allreduce or Reduce, and only the communicator you are given.
"""

import numpy as np
from mpi4py import MPI


def chunk_bounds(length: int, parts: int) -> list[int]:
    """parts + 1 offsets cutting `length` elements into `parts` chunks whose sizes differ
    by at most one; chunks are empty when length < parts."""
    ### BEGIN SOLUTION
    base, extra = divmod(length, parts)
    bounds = [0]
    for c in range(parts):
        bounds.append(bounds[-1] + base + (1 if c < extra else 0))
    return bounds
    ### END SOLUTION


def ring_allreduce(comm, buffer) -> None:
    """Sum a float32 1-D array over the ranks of comm, in place: afterwards every rank's
    buffer holds the elementwise sum of all ranks' buffers. Any length, including lengths
    not divisible by the number of ranks and lengths smaller than it."""
    ### BEGIN SOLUTION
    # HINT: in reduce-scatter step s (s = 0 .. p-2) rank r sends chunk (r - s) mod p and
    # HINT: receives chunk (r - s - 1) mod p; in all-gather step s it sends chunk
    # HINT: (r + 1 - s) mod p and receives chunk (r - s) mod p.
    # HINT: Send then Recv on every rank deadlocks once messages are too big for MPI to
    # HINT: buffer: use Sendrecv, which pairs both halves safely.
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return
    bounds = chunk_bounds(buffer.size, size)
    right, left = (rank + 1) % size, (rank - 1) % size
    incoming = np.empty(bounds[1] - bounds[0], dtype=buffer.dtype)  # the largest chunk

    def chunk(c: int) -> np.ndarray:
        return buffer[bounds[c % size]:bounds[c % size + 1]]

    for step in range(size - 1):
        send, recv = chunk(rank - step), chunk(rank - step - 1)
        got = incoming[:recv.size]
        comm.Sendrecv(send, dest=right, sendtag=step, recvbuf=got, source=left, recvtag=step)
        recv += got
    comm.barrier()  # every rank has its reduced chunk before the all-gather starts
    for step in range(size - 1):
        send, recv = chunk(rank + 1 - step), chunk(rank - step)
        got = incoming[:recv.size]
        comm.Sendrecv(send, dest=right, sendtag=size + step, recvbuf=got, source=left,
                      recvtag=size + step)
        recv[...] = got
    ### END SOLUTION


def main():
    """My own test: mpiexec -n 4 python mpi_2_ring.py"""
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    data = np.arange(10, dtype=np.float32) * (rank + 1)
    expected = np.arange(10, dtype=np.float32) * sum(range(1, comm.Get_size() + 1))
    ring_allreduce(comm, data)
    print(rank, "ok" if np.allclose(data, expected) else "WRONG", data)


if __name__ == "__main__":
    main()
