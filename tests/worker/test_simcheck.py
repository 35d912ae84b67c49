"""The race and memory-error detector for the CUDA simulator (grader/simcheck.py)."""

import json
from pathlib import Path

import numpy as np
import pytest

from grader.worker import simcheck
from nnkit import backend
from nnkit.backend import cuda, select, to_device, to_host
from nnkit.submission import NAMED, load_function

pytestmark = pytest.mark.skipif(select().on_gpu, reason="simcheck checks the CUDA simulator")

T = 16  # tile of the test GEMM: 32x32 matrices make 2x2 blocks and 2 steps along K


@cuda.jit
def tiled_gemm(A, B, C, sync_loaded, sync_used):
    """C = A @ B for multiples of T, with either barrier left out on request."""
    A_tile = cuda.shared.array((T, T), np.float32)
    B_tile = cuda.shared.array((T, T), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    i = cuda.blockIdx.y * T + ty
    j = cuda.blockIdx.x * T + tx
    acc = np.float32(0.0)
    for k0 in range(0, A.shape[1], T):
        A_tile[ty, tx] = A[i, k0 + tx]
        B_tile[ty, tx] = B[k0 + ty, j]
        if sync_loaded:
            cuda.syncthreads()
        for kk in range(T):
            acc += A_tile[ty, kk] * B_tile[kk, tx]
        if sync_used:
            cuda.syncthreads()
    C[i, j] = acc


@cuda.jit
def rotate_shared(x, out):
    """out[t] = x[t + 1], but thread 6 reads the element thread 7 never writes."""
    sh = cuda.shared.array(8, np.float32)
    t = cuda.threadIdx.x
    if t < 7:
        sh[t] = x[t]
    cuda.syncthreads()
    out[t] = sh[(t + 1) % 8]


@cuda.jit
def shift_right(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i - 1]  # i == 0 reads x[-1], the last element


@cuda.jit
def negative_shared_and_local(x, out):
    sh = cuda.shared.array(4, np.float32)
    loc = cuda.local.array(2, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    loc[0], loc[1] = 0.0, 1.0
    cuda.syncthreads()
    before = sh[t - 1]
    last = loc[-1]
    out[t] = before + last


@cuda.jit
def two_bugs(x, out):
    sh = cuda.shared.array(2, np.float32)
    t = cuda.threadIdx.x
    out[t] = sh[0]  # nobody writes sh
    out[t] = x[t - 1]


def line_of(text: str) -> int:
    """The line of this file that holds `text`, as findings report it."""
    lines = Path(__file__).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def sites(findings) -> set[tuple[str, int]]:
    return {(f.kind, f.line) for f in findings}


def operands(M: int, N: int, K: int, halves_equal: bool = False):
    rng = np.random.default_rng(M * N + K)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    if halves_equal:  # the two steps along K see the same tiles: a late overwrite is harmless
        A[:, K // 2:] = A[:, :K // 2]
        B[K // 2:] = B[:K // 2]
    return A, B


@pytest.mark.parametrize("module, function", [
    ("gemm_1_naive", "gemm_naive"),
    ("gemm_2_shared", "gemm_shared"),
    ("gemm_3_register", "gemm_register"),
    ("gemm_4_hierarchical", "gemm_hierarchical"),
])
def test_solution_kernels_are_clean_and_unchanged(module, function):
    launch = load_function(NAMED["solution"], module, function)
    A, B = operands(32, 33, 40)
    C = np.random.default_rng(1).uniform(-1, 1, (32, 33)).astype(np.float32)
    dA = to_device(np.ascontiguousarray(A.T)).T  # a transposed view, as Part 2 passes them
    dB = to_device(B)
    results = []
    for instrumented in (False, True):
        dC = to_device(C)
        if instrumented:
            with simcheck.instrument() as findings:
                launch(dA, dB, dC, 2.0, 5.0)
            assert list(findings) == [], [f.describe() for f in findings]
        else:
            launch(dA, dB, dC, 2.0, 5.0)
        results.append(to_host(dC))
    assert np.array_equal(results[0], results[1])
    assert np.allclose(results[1], 2 * A.astype(np.float64) @ B + 5 * C, atol=1e-4)


@pytest.mark.parametrize("sync_loaded, sync_used, kind, lines", [
    (True, True, None, []),
    # The next load overwrites tiles other threads still read.
    (True, False, simcheck.WAR, ["A_tile[ty, tx] = A[", "B_tile[ty, tx] = B["]),
    # Threads read tile elements other threads have just written.
    (False, True, simcheck.RAW, ["acc += A_tile[ty, kk]"]),
])
def test_missing_syncthreads_is_flagged(sync_loaded, sync_used, kind, lines):
    A, B = operands(32, 32, 32, halves_equal=True)
    dC = to_device(np.zeros((32, 32), np.float32))
    with simcheck.instrument() as findings:
        tiled_gemm[(2, 2), (T, T)](to_device(A), to_device(B), dC, sync_loaded, sync_used)
    assert {(kind, line_of(text)) for text in lines} <= sites(findings)
    if kind is None:
        assert list(findings) == []
    if sync_loaded:  # with equal halves along K the missing second barrier does no harm
        assert np.allclose(to_host(dC), A.astype(np.float64) @ B, atol=1e-4)
    race = next(f for f in findings if f.kind == kind) if kind else None
    if race is not None:
        assert race.array.startswith("shared float32[16, 16] ")
        assert race.other_thread is not None and race.other_thread != race.thread
        assert race.count > 1 and race.file == __file__


def test_uninitialized_shared_read():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    with simcheck.instrument() as findings:
        rotate_shared[1, 8](x, out)
    assert [f.to_json() for f in findings] == [{
        "kind": simcheck.UNINITIALIZED, "array": "shared float32[8] sh", "index": (7,),
        "thread": (6, 0, 0), "block": (0, 0, 0), "other_thread": None,
        "file": __file__, "line": line_of("out[t] = sh[(t + 1) % 8]"), "count": 1}]
    json.dumps(findings[0].to_json())
    assert findings[0].describe().startswith(
        f"test_simcheck.py:{findings[0].line}: uninitialized-read on shared float32[8] sh [7]")


def test_negative_index_on_argument_keeps_numpy_result():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    with simcheck.instrument() as findings:
        shift_right[2, 4](to_device(x), out)
    assert np.array_equal(out, np.roll(x, 1))
    (finding,) = findings
    assert (finding.kind, finding.index, finding.thread, finding.block) == (
        simcheck.NEGATIVE_INDEX, (-1,), (0, 0, 0), (0, 0, 0))
    assert finding.array == "argument float32[8] x"
    assert finding.line == line_of("out[i] = x[i - 1]")


def test_negative_index_on_shared_and_local_arrays():
    out = np.zeros(4, np.float32)
    with simcheck.instrument() as findings:
        negative_shared_and_local[1, 4](np.arange(4, dtype=np.float32), out)
    assert np.array_equal(out, [4.0, 1.0, 2.0, 3.0])
    got = {(f.array, f.index, f.count, f.line) for f in findings}
    assert got == {("shared float32[4] sh", (-1,), 1, line_of("before = sh[t - 1]")),
                   ("local float32[2] loc", (-1,), 4, line_of("last = loc[-1]"))}


def test_findings_are_deduplicated_and_capped():
    x = np.arange(4, dtype=np.float32)
    with simcheck.instrument() as findings:
        two_bugs[1, 4](x, np.zeros(4, np.float32))
    assert sorted((f.kind, f.count) for f in findings) == [
        (simcheck.NEGATIVE_INDEX, 1), (simcheck.UNINITIALIZED, 4)]
    with simcheck.instrument(max_findings=1) as capped:
        two_bugs[1, 4](x, np.zeros(4, np.float32))
    assert len(capped) == 1 and capped[0].count + capped.dropped == 5


def test_simulator_is_restored_after_the_block():
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    patched = [(kernelapi.FakeCUDAShared, "array"), (kernelapi.FakeCUDALocal, "array"),
               (kernel.BlockThread, "syncthreads"),
               (devicearray.FakeWithinKernelCUDAArray, "__getitem__"),
               (devicearray.FakeWithinKernelCUDAArray, "__setitem__")]
    before = [owner.__dict__[name] for owner, name in patched]
    x = np.arange(4, dtype=np.float32)
    with simcheck.instrument() as findings:
        two_bugs[1, 4](x, np.zeros(4, np.float32))
        with pytest.raises(simcheck.SimcheckError, match="already active"):
            with simcheck.instrument():
                pass
    seen = [f.to_json() for f in findings]
    two_bugs[1, 4](x, np.zeros(4, np.float32))
    assert [f.to_json() for f in findings] == seen
    assert [owner.__dict__[name] for owner, name in patched] == before
    assert "_simcheck_epoch" not in kernel.BlockThread.__dict__
    # Also when the kernel raises (here an index past the end, as without simcheck).
    with pytest.raises(IndexError), simcheck.instrument():
        two_bugs[1, 8](x, np.zeros(8, np.float32))
    assert [owner.__dict__[name] for owner, name in patched] == before


def test_refuses_to_run_on_a_gpu(monkeypatch):
    monkeypatch.setattr(backend, "_selected", backend.Backend(backend.GPU, "test"))
    with pytest.raises(simcheck.SimcheckError, match="simulator"):
        with simcheck.instrument():
            pass


@cuda.jit
def shared_histogram(x, out, use_atomics):
    """Every thread adds into one of 4 shared bins: atomically, or with a plain +=."""
    bins = cuda.shared.array(4, np.float32)
    t = cuda.threadIdx.x
    if t < 4:
        bins[t] = 0.0
    cuda.syncthreads()
    if use_atomics:
        cuda.atomic.add(bins, t % 4, x[t])
    else:
        bins[t % 4] += x[t]
    cuda.syncthreads()
    if t < 4:
        out[t] = bins[t]


@pytest.mark.parametrize("use_atomics", [True, False])
def test_atomics_do_not_race_with_each_other_but_plain_updates_do(use_atomics):
    x = np.ones(32, np.float32)
    out = to_device(np.zeros(4, np.float32))
    with simcheck.instrument() as findings:
        shared_histogram[1, 32](to_device(x), out, use_atomics)
    races = {f.kind for f in findings} & set(simcheck.RACES)
    if use_atomics:
        assert list(findings) == [] and np.array_equal(to_host(out), np.full(4, 8.0))
    else:
        assert races, list(findings)


@cuda.jit
def _zero_then_write(out):
    t = cuda.threadIdx.x
    if t == 0:
        out[0] = 0.0
    cuda.syncthreads()  # a barrier between the two writes: legal
    if t == 1:
        out[0] = 5.0


@cuda.jit
def _plain_add(out):
    out[0] += 1.0


@cuda.jit
def _atomic_add(out):
    cuda.atomic.add(out, 0, 1.0)


@cuda.jit
def _same_value(out):
    out[0] = 3.0


@pytest.mark.parametrize(("kernel", "blocks", "race"), [
    (_zero_then_write, 1, False), (_plain_add, 2, True), (_atomic_add, 2, False),
    (_same_value, 2, False)])
def test_threads_writing_one_argument_element(kernel, blocks, race):
    """Red team: a column sum added into out[j] by every thread with a plain += was right
    in the simulator and a race on a GPU. Two threads writing one element of an argument
    with different values, from two blocks or with no barrier between, is reported;
    atomics, equal values and writes a syncthreads apart are not."""
    out = to_device(np.zeros(1, np.float32))
    with simcheck.instrument() as found:
        kernel[blocks, 4](out)
    kinds = {f.kind for f in found}
    assert (simcheck.GLOBAL_WAW in kinds) == race, kinds
    assert to_host(out)[0] in (3.0, 5.0, 8.0)
