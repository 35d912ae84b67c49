"""The simulator's thread blocks run by grader/worker/blocksync.py: same results, barriers,
early returns and errors as the simulator's own polling loop, and the race checker still
sees a missing barrier."""

import numpy as np
import pytest

from grader.worker import blocksync, simcheck
from nnkit.backend import cuda, select, to_device, to_host

pytestmark = pytest.mark.skipif(select().on_gpu, reason="blocksync changes the CUDA simulator")

N = 64  # threads of the test blocks


@pytest.fixture(autouse=True)
def installed():
    assert blocksync.install()
    yield
    blocksync.uninstall()


@cuda.jit
def block_sum(x, out):
    """Tree reduction in shared memory: right only if every barrier holds all threads."""
    sh = cuda.shared.array(N, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[cuda.blockIdx.x * N + t]
    cuda.syncthreads()
    step = N // 2
    while step > 0:
        if t < step:
            sh[t] += sh[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = sh[0]


@cuda.jit
def early_return(x, out):
    """Half of the threads return before the barrier the others wait at."""
    sh = cuda.shared.array(N, np.float32)
    t = cuda.threadIdx.x
    if t >= N // 2:
        return
    sh[t] = x[t]
    cuda.syncthreads()
    out[t] = sh[N // 2 - 1 - t]


@cuda.jit
def fails_in_one_thread(x):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 5:
        x[x.shape[0] + t] = 1.0  # past the end: IndexError in the simulator
    cuda.syncthreads()
    x[t] = t


@cuda.jit
def count_positive(x, out):
    out[0] = cuda.syncthreads_count(x[cuda.threadIdx.x] > 0)


@cuda.jit
def reversed_copy(x, out, sync):
    """out = x reversed through shared memory; without the barrier, a read-after-write."""
    sh = cuda.shared.array(N, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    if sync:
        cuda.syncthreads()
    out[t] = sh[N - 1 - t]


def test_the_blocks_compute_what_numpy_does():
    x = np.arange(3 * N, dtype=np.float32)
    out = to_device(np.zeros(3, np.float32))
    block_sum[3, N](to_device(x), out)
    assert np.array_equal(to_host(out), x.reshape(3, N).sum(axis=1))


def test_threads_that_returned_do_not_hold_the_barrier():
    x = np.arange(N, dtype=np.float32)
    out = to_device(np.full(N, -1, np.float32))
    early_return[1, N](to_device(x), out)
    got = to_host(out)
    assert np.array_equal(got[:N // 2], x[:N // 2][::-1]) and (got[N // 2:] == -1).all()


def test_an_error_in_one_thread_reaches_the_launcher_and_stops_the_others():
    x = to_device(np.zeros(N, np.float32))
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\]"):
        fails_in_one_thread[1, N](x)
    assert (to_host(x) == 0).all()  # the others stopped at the second barrier


def test_barrier_votes_count_every_thread():
    x = np.where(np.arange(N) % 3 == 0, 1.0, -1.0).astype(np.float32)
    out = to_device(np.zeros(1, np.int64))
    count_positive[1, N](to_device(x), out)
    assert to_host(out)[0] == (x > 0).sum()


@pytest.mark.parametrize("sync", [True, False])
def test_the_race_checker_still_sees_a_missing_barrier(sync):
    x = np.arange(N, dtype=np.float32)
    out = to_device(np.zeros(N, np.float32))
    with simcheck.instrument() as findings:
        reversed_copy[1, N](to_device(x), out, sync)
    kinds = {f.kind for f in findings}
    if sync:
        assert kinds == set() and np.array_equal(to_host(out), x[::-1])
    else:  # which race shows first depends on the threads' order; one always does
        assert kinds & set(simcheck.RACES), kinds


def test_uninstall_restores_the_simulator():
    from numba.cuda.simulator import kernel

    patched = kernel.BlockManager.run
    blocksync.uninstall()
    assert kernel.BlockManager.run is not patched
    assert "blocksync" not in kernel.BlockManager.run.__module__
    assert blocksync.install() and kernel.BlockManager.run is not patched  # a fresh install


SEEN: list = []  # (OS thread, the thread as threading sees it, threadIdx.x), per CUDA thread


@cuda.jit
def note_threads(out):
    import threading

    t = cuda.threadIdx.x
    SEEN.append((threading.get_ident(), threading.current_thread(), t))
    out[t] = t


@cuda.jit
def note_threads_at_barrier(out):
    import threading

    t = cuda.threadIdx.x
    cuda.syncthreads()
    SEEN.append((threading.get_ident(), threading.current_thread(), t))
    out[t] = t


def test_a_kernel_without_barriers_runs_its_threads_in_order_on_one_os_thread():
    SEEN.clear()
    out = to_device(np.zeros(N, np.float32))
    note_threads[2, N](out)
    assert [t for _, _, t in SEEN] == list(range(N)) * 2
    assert len({os_thread for os_thread, _, _ in SEEN}) == 1
    # threading.current_thread() is the simulated thread, as when it had a thread of its own
    assert all(type(th).__name__ == "BlockThread" and th.threadIdx.x == t for _, th, t in SEEN)
    assert np.array_equal(to_host(out), np.arange(N, dtype=np.float32))


def test_threads_that_wait_at_a_barrier_run_on_the_launching_thread_and_start_none():
    import threading

    SEEN.clear()
    out = to_device(np.zeros(N, np.float32))
    before = threading.active_count()
    note_threads_at_barrier[3, N](out)
    assert {os_thread for os_thread, _, _ in SEEN} == {threading.get_ident()}
    assert threading.active_count() == before
    assert sorted(t for _, _, t in SEEN) == sorted(list(range(N)) * 3)
    # after the barrier, the threads go on in the order they reached it
    assert [t for _, _, t in SEEN[:N]] == list(range(N))
    assert threading.current_thread() is threading.main_thread()  # given back to the launcher


@cuda.jit
def exits_in_one_thread(out):
    t = cuda.threadIdx.x
    if t == 3:
        raise SystemExit(0)  # ends its thread only, as in a thread of its own
    out[t] = 1.0


# pytest's thread excepthook reports the SystemExit the default one would ignore
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_ending_by_system_exit_stops_neither_its_block_nor_the_next():
    out = to_device(np.zeros(N, np.float32))
    exits_in_one_thread[1, N](out)
    got = to_host(out)
    assert got[3] == 0 and np.delete(got, 3).all()
    block_sum[1, N](to_device(np.ones(N, np.float32)), out)  # the next block runs
    assert to_host(out)[0] == N


WIDE = 1024  # the most threads a block may have


@cuda.jit
def wide_barrier(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    out[t] = t


def test_a_full_block_launched_from_another_thread_runs_there_and_starts_no_thread():
    import threading

    out = to_device(np.zeros(WIDE, np.float32))
    counts = []

    def launch():
        before = threading.active_count()
        wide_barrier[1, WIDE](out)
        counts.append((before, threading.active_count()))

    launcher = threading.Thread(target=launch, daemon=True)
    launcher.start()
    launcher.join(timeout=120)
    assert not launcher.is_alive(), "the block hung"
    assert counts and counts[0][0] == counts[0][1]
    assert np.array_equal(to_host(out), np.arange(WIDE, dtype=np.float32))


@cuda.jit
def wait_for_a_later_thread(flag, out):
    """Thread 0 waits until the block's last thread has set the flag (atomically), as a
    GPU's independent warps allow; then every thread writes."""
    t = cuda.threadIdx.x
    if t == cuda.blockDim.x - 1:
        cuda.atomic.add(flag, 0, 1)
    if t == 0:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass
    out[t] = 1.0


def test_a_thread_spinning_on_an_atomic_flag_lets_the_others_run():
    """A red team's (round six): before atomics let the others run first, thread 0 spun
    for ever, the thread that sets the flag never started."""
    flag = to_device(np.zeros(1, np.int32))
    out = to_device(np.zeros(N, np.float32))
    wait_for_a_later_thread[1, N](flag, out)
    assert to_host(out).all() and to_host(flag)[0] == 1
