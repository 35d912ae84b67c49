"""Warp intrinsics in the simulator (grader/worker/warps.py): shuffles, votes and syncwarp
give what a GPU gives, in full and partial warps, with lanes that returned early; an
error in one lane still ends the block."""

import numpy as np
import pytest

from grader.worker import blocksync, warps
from nnkit.backend import cuda, select, to_device, to_host

pytestmark = pytest.mark.skipif(select().on_gpu, reason="warps changes the CUDA simulator")

FULL = 0xFFFFFFFF


@pytest.fixture(autouse=True)
def installed():
    assert blocksync.install() and warps.install()
    yield
    warps.uninstall()
    blocksync.uninstall()


@cuda.jit
def warp_sums(x, out):
    """Each warp sums its lanes' values with shfl_down_sync; lane 0 writes the sum."""
    t = cuda.threadIdx.x
    v = x[t]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if t % 32 == 0:
        out[t // 32] = v


@cuda.jit
def shuffles(x, out):
    t = cuda.threadIdx.x
    v = x[t]
    out[0, t] = cuda.shfl_sync(FULL, v, 3)  # lane 3's value
    out[1, t] = cuda.shfl_up_sync(FULL, v, 1)  # lane - 1, own value at lane 0
    out[2, t] = cuda.shfl_xor_sync(FULL, v, 1)  # neighbours swapped
    out[3, t] = cuda.ballot_sync(FULL, v > 15.5)
    out[4, t] = 1.0 if cuda.all_sync(FULL, v >= 0) else 0.0
    out[5, t] = 1.0 if cuda.any_sync(FULL, v > 30.5) else 0.0
    cuda.syncwarp(FULL)
    out[6, t] = cuda.lanemask_lt()


@cuda.jit
def after_early_return(x, out):
    """Lanes 16..31 return at once; the others shuffle among themselves."""
    t = cuda.threadIdx.x
    if t >= 16:
        return
    out[t] = cuda.shfl_xor_sync(0xFFFF, x[t], 8)


@cuda.jit
def lane_fails(x):
    t = cuda.threadIdx.x
    if t == 5:
        x[x.shape[0] + t] = 1.0  # past the end: IndexError in the simulator
    x[t] = cuda.shfl_down_sync(FULL, x[t], 1)


def test_a_warp_reduction_sums_each_warp_of_a_block():
    x = np.arange(96, dtype=np.float32)  # three warps
    out = to_device(np.full(3, np.nan, np.float32))
    warp_sums[1, 96](to_device(x), out)
    assert (to_host(out) == x.reshape(3, 32).sum(axis=1)).all()


@cuda.jit
def partial_warp(x, out):
    """A block of 40 threads: its second warp has 8 lanes, which swap values in pairs."""
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_xor_sync(FULL, x[t], 1)


def test_a_partial_warp_exchanges_among_its_lanes():
    x = np.arange(40, dtype=np.float32)
    out = to_device(np.full(40, np.nan, np.float32))
    partial_warp[1, 40](to_device(x), out)
    assert (to_host(out) == np.arange(40) ^ 1).all()


def test_shuffles_votes_and_masks_match_cuda():
    x = np.arange(32, dtype=np.float32)
    out = to_device(np.full((7, 32), np.nan, np.float32))
    shuffles[1, 32](to_device(x), out)
    got = to_host(out)
    lanes = np.arange(32)
    assert (got[0] == 3).all()
    assert (got[1] == np.maximum(lanes - 1, 0)).all()
    assert (got[2] == lanes ^ 1).all()
    assert (got[3] == np.float32(0xFFFF0000)).all()
    assert (got[4] == 1).all() and (got[5] == 1).all()
    assert (got[6] == ((1 << lanes) - 1).astype(np.float32)).all()


def test_lanes_that_returned_are_not_waited_for():
    x = np.arange(32, dtype=np.float32)
    out = to_device(np.full(16, np.nan, np.float32))
    after_early_return[1, 32](to_device(x), out)
    assert (to_host(out) == np.arange(16) ^ 8).all()


def test_an_error_in_one_lane_ends_the_block():
    x = to_device(np.zeros(32, np.float32))
    with pytest.raises(IndexError):
        lane_fails[1, 32](x)


@cuda.jit
def barrier_against_shuffle(out):
    t = cuda.threadIdx.x
    if t == 0:
        cuda.syncthreads()  # waits for lanes 1-31, which wait at the shuffle for lane 0
    else:
        out[t] = cuda.shfl_down_sync(FULL, np.float32(t), 1)


def test_a_block_whose_waits_can_never_end_fails_instead_of_hanging():
    out = to_device(np.zeros(32, np.float32))
    with pytest.raises(blocksync.Deadlock, match="deadlocked: 1 of its threads wait at "
                                                 "syncthreads"):
        barrier_against_shuffle[1, 32](out)
    warp_sums[1, 32](to_device(np.ones(32, np.float32)), out)  # the next launch works
    assert to_host(out)[0] == 32


def test_warp_intrinsics_need_blocksync():
    warps.uninstall()
    blocksync.uninstall()
    assert not warps.install()  # without blocksync's scheduling there is nothing to wait on
    assert blocksync.install() and warps.install()
