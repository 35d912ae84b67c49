"""A part's job -> isolation -> checks -> items (gemm, net, mpi): the only place points are given."""
