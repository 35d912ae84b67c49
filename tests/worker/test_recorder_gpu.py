"""On a GPU: the launch recorder replays calls on numba device arrays viewed in parts
(the memory of a view belongs to the whole allocation, as CuPy's does)."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import KIT_ROOT

pytestmark = pytest.mark.gpu

SCRIPT = textwrap.dedent('''
    import sys
    from pathlib import Path
    import numpy as np
    from grader.worker import launches
    from nnkit.backend import select, to_device, to_host
    from nnkit.submission import load_function

    select()
    folder = Path(sys.argv[1]).resolve()
    recorder = launches.Recorder(folder, True)
    recorder.install()
    launch = load_function(folder, "gemm_1_naive", "gemm_naive")
    rng = np.random.default_rng(0)
    host = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3)]
    bufs = [to_device(h) for h in host]
    launch(*bufs, 1.0, 0.0)  # a first call: what it keeps, it keeps
    host = [to_host(b) for b in bufs]
    recorder.begin(launches.FULL, list(zip(bufs, host)))
    launch(*bufs, 1.0, 0.0)
    record = recorder.end()
    again = recorder.replay(record, {"C": recorder.ref_of(bufs[2])})
    print(float(np.abs(again["C"] - to_host(bufs[2])).max()))
''')

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
    (tmp_path / "gemm_1_naive.py").write_text(VIEWS)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=KIT_ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NNKIT_DEVICE": "gpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0.0", done.stdout
