from nnkit.collectives import ring_allreduce  # noqa: F401
