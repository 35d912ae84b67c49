"""nnkit: the trusted, shared code of the Neural networks on CUDA and MPI kit."""
