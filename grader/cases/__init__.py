"""What each part's cases are made of, derived from the run's secret: gemm, net, mpi."""
