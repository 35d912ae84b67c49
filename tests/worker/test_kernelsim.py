"""The simulator as the worker sets it up (grader/worker/kernelsim.py): dynamic shared
memory of a NumPy scalar type, which numba compiles for a GPU, runs; static shared arrays
on different lines stay apart (the mended allocator keys them by the kernel's line, not
its own); cuda.is_cuda_array and as_cuda_array exist, as on a GPU. Run in a fresh
interpreter: the simulator is chosen at import."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import KIT_ROOT

SCRIPT = '''\
import os
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
from numba import cuda
from grader.worker import kernelsim

assert kernelsim.install()


@cuda.jit
def dynamic(out):
    smem = cuda.shared.array(0, np.float32)
    i = cuda.threadIdx.x
    smem[i] = i
    cuda.syncthreads()
    out[i] = smem[3 - i]


@cuda.jit
def two_static(out):
    a = cuda.shared.array(4, np.float32)
    b = cuda.shared.array(4, np.float32)
    i = cuda.threadIdx.x
    a[i] = 1.0
    b[i] = 2.0
    cuda.syncthreads()
    out[i] = a[i] + 10 * b[i]


out = np.zeros(4, np.float32)
dynamic[1, 4, 0, 16](out)
print("dynamic", out.tolist())
two_static[1, 4](out)
print("static", out.tolist())
device = cuda.to_device(out)
print("host api", cuda.is_cuda_array(device), cuda.is_cuda_array(out),
      cuda.as_cuda_array(device) is device)
'''


def test_dynamic_shared_memory_of_a_numpy_type_runs_and_static_arrays_stay_apart():
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], cwd=KIT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dynamic [3.0, 2.0, 1.0, 0.0]" in result.stdout
    assert "static [21.0, 21.0, 21.0, 21.0]" in result.stdout
    assert "host api True False True" in result.stdout  # as on a GPU


LIMITS = '''\
import os
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
from numba import cuda
from grader.worker import kernelsim

assert kernelsim.install()


@cuda.jit
def fill(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0


@cuda.jit
def big_tiles(out):
    a = cuda.shared.array((64, 128), np.float32)
    b = cuda.shared.array((64, 128), np.float32)
    out[0] = a[0, 0] + b[0, 0]


out = np.zeros(8, np.float32)
fill[1, (32, 32)](out)
print("1024 threads ran")
for launch in (lambda: fill[1, (32, 64)](out), lambda: fill[(1, 70000), 1](out),
               lambda: fill[1, 8, 0, 64 * 1024](out), lambda: big_tiles[1, 1](out)):
    try:
        launch()
    except kernelsim.NotOnAGpu as err:
        print("refused:", err)
'''


def test_launches_no_gpu_accepts_are_refused():
    """Red team: a naive kernel with 32x64 blocks kept its points in the simulator; a GPU
    refuses more than 1,024 threads a block, and more than 48 KB of shared memory."""
    result = subprocess.run([sys.executable, "-c", LIMITS], cwd=KIT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "1024 threads ran" and len(lines) == 5, lines
    assert "a block of 32x64x1 threads (2,048)" in lines[1]
    assert "65,535 blocks along y" in lines[2]
    assert "65,536 bytes of dynamic shared memory" in lines[3]
    assert "65,536 bytes of shared memory a block" in lines[4]


WHOLE_ARRAYS = '''\
import os
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
from numba import cuda
from grader.worker import kernelsim

assert kernelsim.install()


@cuda.jit
def elements(out):
    acc = cuda.local.array(4, np.float32)
    tile = cuda.shared.array((2, 2), np.float32)
    i = cuda.threadIdx.x
    for k in range(4):
        acc[k] = k * i
    tile[i, 0] = acc[3]
    tile[i, 1] = acc[2] + tile[i, 0]
    cuda.syncthreads()
    out[i] = tile[1 - i, 1]


@cuda.jit
def broadcast_product(A, B, C, how):
    a = cuda.local.array((2, 2), np.float32)
    b = cuda.shared.array((2, 2), np.float32)
    for r in range(2):
        for c in range(2):
            a[r, c] = A[r, c]
            b[r, c] = B[r, c]
    if how == 0:
        d = (a.reshape(2, 2, 1) * b.reshape(1, 2, 2)).sum(axis=1)
    elif how == 1:
        d = np.dot(a, b)
    else:
        d = a.dot(b)
    for r in range(2):
        for c in range(2):
            C[r, c] = d[r, c]


out = np.zeros(2, np.float32)
elements[1, 2](out)
print("elements:", out.tolist())
A = np.ones((2, 2), np.float32)
for how in range(3):
    try:
        broadcast_product[1, 1](A, A, np.zeros((2, 2), np.float32), how)
        print("computed", how)
    except kernelsim.NotOnAGpu as err:
        print("refused:", str(err)[:40])
'''


def test_shared_and_local_arrays_hold_elements_only():
    """A kernel that copied A and B into local or shared arrays could multiply them with
    NumPy inside the simulator (broadcasting, np.dot, .dot), which no GPU compiles (red
    team: full correctness points for a one-thread kernel). Element accesses still run."""
    result = subprocess.run([sys.executable, "-c", WHOLE_ARRAYS], cwd=KIT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "elements: [5.0, 0.0]", lines
    assert [line.split(":")[0] for line in lines[1:]] == ["refused"] * 3, lines
