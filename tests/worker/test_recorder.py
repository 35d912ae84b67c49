"""The launch recorder against a submission that reaches it (in the simulator, in a fresh
interpreter: installing the recorder rewrites numba's kernel class)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

from tests.conftest import KIT_ROOT

SCRIPT = textwrap.dedent('''
    import sys
    from pathlib import Path
    import numpy as np
    from grader.worker import launches, tamper
    from nnkit.backend import select, to_device
    from nnkit.submission import load_function

    select()
    folder = Path(sys.argv[1]).resolve()
    recorder = launches.Recorder(folder, False)
    recorder.install()
    snapshot = tamper.Snapshot()
    launch = load_function(folder, "gemm_1_naive", "gemm_naive")
    host = [np.ones((2, 2), np.float32) for _ in range(3)]
    bufs = [to_device(h) for h in host]
    recorder.begin(launches.FULL, list(zip(bufs, host)))
    launch(*bufs, 1.0, 0.0)
    record = recorder.end()
    assert record.own_launches == 1
    recorder.replay(record, {"C": recorder.ref_of(bufs[2])})  # as recorded: fine
    snapshot.check()
    # An operation the kit never records, slipped into the record: a host "GEMM"
    record.ops.append(launches.Gemm(lambda *a, **k: None, *record.ops[0].args[:3], 1.0, 0.0,
                                    False, False))
    try:
        recorder.replay(record, {"C": recorder.ref_of(bufs[2])})
        print("replayed an injected operation")
    except launches.ReplayError as err:
        print("refused:", err)
    # A method of the recorder, and the kernel class's call, replaced
    recorder.replay = lambda *a, **k: {}
    type(launch.__globals__["touch"]).__call__ = lambda *a: None
    try:
        snapshot.check()
        print("tampering not seen")
    except tamper.Tampered as err:
        print("tampered:", err)
''')

MODULE = textwrap.dedent('''
    from nnkit.backend import cuda


    @cuda.jit
    def touch(A, B, C, alpha, beta):
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            C[i, j] = alpha * A[i, j]


    def gemm_naive(A, B, C, alpha, beta):
        touch[1, (2, 2)](A, B, C, alpha, beta)
''')


def run_script(script: str, module: str, folder, device: str = "sim") -> str:
    """The script's output, run in a fresh interpreter on `device` ("sim" or "gpu") with
    `module` as the submission's gemm_1_naive.py (the script gets the folder and whether
    it runs on a GPU)."""
    (folder / "gemm_1_naive.py").write_text(module)
    done = subprocess.run([sys.executable, "-c", script, str(folder), str(device == "gpu")],
                          cwd=KIT_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NNKIT_DEVICE": device})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_recorder_refuses_injected_operations_and_its_tampering_is_seen(tmp_path):
    lines = run_script(SCRIPT, MODULE, tmp_path).splitlines()
    assert lines[0].startswith("refused: the record of the call holds an operation"), lines
    assert lines[1].startswith("tampered:") and "Recorder.replay" in lines[1], lines
    assert "FakeCUDAKernel.__call__" in lines[1], lines


def test_a_replay_restores_only_constant_memory_the_call_found():
    """Memory a call found is restored on replay only where it holds one value repeated:
    the whole array owning it, else the view that first showed it (a vector of ones may
    lie in a larger buffer; CuPy's pool rounds allocations up to 512 bytes), compared
    element by element for numeric views and byte by byte otherwise."""
    from grader.worker.launches import Memory

    memory = Memory(False)
    f32 = np.dtype(np.float32)
    snap = np.concatenate([np.ones(4, np.float32), np.arange(60, dtype=np.float32)]
                          ).view(np.uint8)
    restored = memory.pristine(snap, [(0, snap.size), (0, 16)], f32)
    assert restored is not None and restored.size == snap.size
    assert (restored[:16] == snap[:16]).all() and not restored[16:].any()
    assert memory.pristine(snap, [(0, snap.size), (16, 16)], f32) is None  # 0, 1, 2, 3
    ones = np.ones(16, np.float32).view(np.uint8)
    assert (memory.pristine(ones, [(0, 64), (0, 16)], f32) == ones).all()  # all of it
    # One "element" of a structured dtype spans the data: compared byte by byte
    assert memory.pristine(snap, [(16, 64)], np.dtype((np.void, 64))) is None


REPLAY_SCRIPT = textwrap.dedent('''
    import sys
    from pathlib import Path
    import numpy as np
    from grader.worker import launches
    from nnkit.backend import select, to_device, to_host
    from nnkit.submission import load_function

    select()
    folder = Path(sys.argv[1]).resolve()
    recorder = launches.Recorder(folder, sys.argv[2] == "True")
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

KEPT_ONES = textwrap.dedent('''
    import numpy as np
    from nnkit.backend import cuda, to_device

    _kept = {}


    @cuda.jit
    def scale_rows(A, ones, C):
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            C[i, j] = A[i, j] * ones[i]


    def gemm_naive(A, B, C, alpha, beta):
        if "ones" not in _kept:  # the rest of the buffer holds other data
            _kept["ones"] = to_device(np.concatenate(
                [np.ones(C.shape[0], np.float32), np.full(100, 7.0, np.float32)]))
        scale_rows[1, (2, 2)](A, _kept["ones"][:C.shape[0]], C)
''')

def test_a_call_using_a_vector_kept_from_an_earlier_call_replays_exactly(tmp_path):
    assert run_script(REPLAY_SCRIPT, KEPT_ONES, tmp_path) == "0.0"  # the largest difference


TWO_VIEWS = textwrap.dedent('''
    import numpy as np
    from nnkit.backend import cuda, to_device

    _kept = {}


    @cuda.jit
    def scaled_product(A, B, C, ra, rb):
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            s = 0.0
            for k in range(A.shape[1]):
                s += A[i, k] * B[k, j]
            C[i, j] = s * ra[i] * rb[j]


    def gemm_naive(A, B, C, alpha, beta):  # ones kept, used through two views
        if "ones" not in _kept:
            _kept["ones"] = to_device(np.ones(C.shape[0] + C.shape[1], np.float32))
        w = _kept["ones"]
        scaled_product[1, C.shape](A, B, C, w[:C.shape[0]], w[C.shape[0]:])
''')

VOID_SMUGGLE = textwrap.dedent('''
    import numpy as np
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from nnkit.backend import copy_into, cuda, to_device, to_host


    @cuda.jit
    def copy2d(T, C):
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            C[i, j] = T[i * C.shape[1] + j]


    def gemm_naive(A, B, C, alpha, beta):  # the product made on the host
        ans = (alpha * to_host(A) @ to_host(B) + beta * to_host(C)).astype(np.float32).ravel()
        tmp = to_device(ans)
        blob = FakeCUDAArray(tmp._ary.view(np.dtype((np.void, ans.nbytes))))  # 1 "element"
        scratch = to_device(np.zeros(ans.size, np.float32))
        copy_into(FakeCUDAArray(scratch._ary.view(blob._ary.dtype)), blob)  # seen first so
        copy2d[1, C.shape](tmp, C)
''')


def test_a_workspace_of_ones_used_through_two_views_replays_exactly(tmp_path):
    assert run_script(REPLAY_SCRIPT, TWO_VIEWS, tmp_path) == "0.0"


def test_data_seen_first_as_one_structured_element_is_not_restored(tmp_path):
    assert float(run_script(REPLAY_SCRIPT, VOID_SMUGGLE, tmp_path)) > 0.1


def test_a_numba_views_memory_is_its_whole_allocation():
    """On a GPU a numba device array's view shares its allocation's memory (its
    gpu_data.owner); anything else that looks alike is left to the view's own span."""
    from types import SimpleNamespace

    from grader.worker.launches import numba_allocation

    root = SimpleNamespace(device_pointer_value=4096, size=256)
    view = SimpleNamespace(gpu_data=SimpleNamespace(owner=root))
    assert numba_allocation(view, 4096 + 128) == (4096, 256, root)
    assert numba_allocation(view, 4096 + 256) is None  # not inside it
    foreign = SimpleNamespace(gpu_data=SimpleNamespace(owner=object()))  # external memory
    assert numba_allocation(foreign, 4096) is None
    assert numba_allocation(object(), 4096) is None
