"""On a GPU: the launch recorder replays calls on numba device arrays viewed in parts
(the memory of a view belongs to the whole allocation, as CuPy's does)."""

import textwrap

import pytest

from tests.worker.test_recorder import REPLAY_SCRIPT, run_script

pytestmark = pytest.mark.gpu

# A scratch row filled in two steps through a view, then used whole; and a vector of
# ones kept between calls, used through two views.
VIEWS = textwrap.dedent('''
    import numpy as np
    from numba import cuda as numba_cuda
    from nnkit.backend import cuda

    _kept = {}


    @cuda.jit
    def fill(v, value):
        i = cuda.grid(1)
        if i < v.shape[0]:
            v[i] = value


    @cuda.jit
    def product(A, B, C, ra, rb, extra):
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            s = 0.0
            for k in range(A.shape[1]):
                s += A[i, k] * B[k, j]
            C[i, j] = s * ra[i] * rb[j] + extra[0] + extra[extra.shape[0] - 1]


    def gemm_naive(A, B, C, alpha, beta):
        m, n = C.shape
        if "ones" not in _kept:
            _kept["ones"] = numba_cuda.device_array(m + n, np.float32)
            fill[1, 64](_kept["ones"], 1.0)
        w = _kept["ones"]
        extra = numba_cuda.device_array(8, np.float32)
        fill[1, 64](extra[:4], 0.0)
        fill[1, 64](extra[4:], 0.5)
        product[1, C.shape](A, B, C, w[:m], w[m:], extra)
''')


def test_views_of_numba_allocations_replay_exactly(tmp_path):
    assert run_script(REPLAY_SCRIPT, VIEWS, tmp_path, "gpu") == "0.0"
