"""Re-exports the kit's own copies of the Part 3 functions (their bodies, in the jail, are
the stubs the student kit ships)."""
from nnkit.collectives import allreduce_gradients, scatter_batch, split_counts


def shard_counts(n, size):
    return split_counts(n, size)


__all__ = ["allreduce_gradients", "scatter_batch", "shard_counts"]
