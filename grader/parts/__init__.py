"""A part's job -> isolation -> checks -> items (gemm, net, mpi): where points are given."""
