"""The paper's comparison (Kamra, Goyal, Seo, Zois, "Parallel Gradient Descent for
Multilayer Feedforward Neural Networks") and leapfrogging backpropagation (Saraiya).

One module per implementation of the same network as nnkit/network.py:

    naive       per-example loops compiled by numba, one thread
    threads     the examples of a minibatch split over threads, partial gradients reduced
    matpar      the whole batch as matrix products, each product's loops split over threads
    blas        the CPU reference itself (NumPy on BLAS), one thread or all cores
    gpu         the solution's kernels with its GEMMs or cuBLAS; CuPy on cuBLAS
    torch_impl  PyTorch on the CPU or the GPU (optional)

and around them: `impls` (the registry the benchmark walks), `bench` (`python -m nnkit
bench`), `tune` (`python -m nnkit tune`), `leapfrog` and `leapfrog_bench` (seed 004).
"""
