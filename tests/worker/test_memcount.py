"""Memory-traffic counts of simulated kernels (grader/worker/memcount.py): global sectors
per warp request, shared bank conflicts, loads per multiply-add. Every case is one or a
few 32x32 blocks; the expected counts are worked out by hand in each test."""

import numpy as np
import pytest

from grader.cases.gemm import build_operands, profile_case
from grader.checks import simperf
from grader.worker import memcount, simcheck
from nnkit.backend import cuda, select, to_device
from nnkit.gemm import KERNELS, gemm
from nnkit.submission import NAMED, load_function

pytestmark = pytest.mark.skipif(select().on_gpu, reason="memcount counts in the CUDA simulator")

S = 32  # one warp along x; the test matrices are S x S


@cuda.jit
def naive_rows_on_x(A, B, C):
    """The naive GEMM with threadIdx.x on the rows of C: a warp reads 32 rows of A (32
    sectors a load) and writes a column of C (32 sectors a store)."""
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


@cuda.jit
def tile_reads(x, out, padded):
    """Stage an S x S tile in shared memory (row-wise, conflict-free), then let each thread
    sum a row of it: lane tx reads tile[tx, k], 32 words apart, all in one bank, unless
    the tile is padded to S + 1 columns (then lane tx's word is in bank (tx + k) % 32)."""
    tile = cuda.shared.array((S, S), np.float32)
    wide = cuda.shared.array((S, S + 1), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    if padded:
        wide[ty, tx] = x[ty, tx]
    else:
        tile[ty, tx] = x[ty, tx]
    cuda.syncthreads()
    if ty == 0:
        acc = np.float32(0.0)
        for k in range(S):
            acc += wide[tx, k] if padded else tile[tx, k]
        out[tx] = acc


def _count(launch) -> dict[str, dict[str, int]]:
    counter = memcount.Counter()
    with simcheck.instrument(counter=counter) as findings:
        launch()
    assert not findings, [f.describe() for f in findings]
    return counter.to_json()


def _operands(m: int, n: int, k: int):
    rng = np.random.default_rng(3)
    return (to_device(rng.random((m, k), dtype=np.float32)),
            to_device(rng.random((k, n), dtype=np.float32)),
            to_device(np.zeros((m, n), np.float32)))


def _solution(kernel: str) -> tuple[dict[str, int], dict[str, float | None]]:
    """The solution's only kernel for `kernel`, counted on its profiled case."""
    case = profile_case(kernel)
    ops = build_operands(case, 1)
    A, B, C = ops.views(tuple(to_device(b) for b in (ops.A_buf, ops.B_buf, ops.C_buf)))
    launch = load_function(NAMED["solution"], *KERNELS[kernel])
    counts = _count(lambda: gemm(launch, A, B, C, case.alpha, case.beta))
    assert len(counts) == 1
    (c,) = counts.values()
    return c, simperf.metrics(c, case.M * case.N * case.K)


@pytest.mark.parametrize("words, conflicts", [
    (set(range(32)), 0),  # a row: one word per bank
    ({7}, 0),  # a broadcast
    ({0, 32, 64}, 2),  # three words of bank 0
    ({32 * t for t in range(32)}, 31),  # a column of a 32-wide tile
    ({2 * t for t in range(32)}, 1),  # stride 2: banks 0, 2, ... serve two words each
])
def test_bank_conflicts_are_the_busiest_bank_minus_one(words, conflicts):
    assert memcount.bank_conflicts(words) == conflicts


def test_solution_naive_reads_a_broadcast_of_a_and_coalesced_b():
    # 32 x 32 x 16, blocks of 32 x 8: a warp is one row i of C and 32 columns j. Per k it
    # loads A[i, k] (one sector: the same word for all lanes) and B[k, j..j+31] (128 bytes:
    # 4 sectors); it stores 32 consecutive floats of C (4 sectors).
    c, m = _solution("naive")
    warps, K = 32 * 32 // 32, 16
    assert c["global_load_requests"] == warps * K * 2
    assert c["global_load_sectors"] == warps * K * (1 + 4)
    assert c["global_store_sectors"] == warps * 4
    assert m["sectors_per_load"] == 2.5 and m["sectors_per_store"] == 4.0
    assert m["global_loads_per_fma"] == 2.0  # A and B once per multiply-add
    assert c["shared_load_accesses"] == 0
    assert c["arrays"] == {"A": [warps * K, warps * K, 0, 0], "B": [warps * K, warps * K * 4, 0, 0],
                           "C": [0, 0, warps, warps * 4]}
    assert m["sectors_by_argument"] == "A load 1, B load 4, C store 4"


def test_uncoalesced_naive_touches_a_sector_per_lane():
    A, B, C = _operands(S, S, 8)
    counts = _count(lambda: naive_rows_on_x[(1, S // 8), (S, 8)](A, B, C))
    c = counts["naive_rows_on_x"]
    # Per k, a warp loads A[i..i+31, k] (32 rows, 32 sectors) and B[k, j] (a broadcast).
    assert c["global_load_sectors"] == c["global_load_requests"] // 2 * (32 + 1)
    assert c["global_store_sectors"] == c["global_store_requests"] * 32
    m = simperf.metrics(c, S * S * 8)
    assert m["sectors_per_store"] == 32.0
    assert m["sectors_by_argument"] == "A load 32, B load 1, C store 32"


def test_solution_shared_is_coalesced_and_conflict_free():
    # 32 x 32 x 32, one block of 32 x 32 threads, one step along K: each warp (a row ty)
    # loads a row of A's and of B's tile (4 sectors each), then reads A_tile[ty, kk] (a
    # broadcast) and B_tile[kk, tx] (32 banks): no conflict anywhere.
    c, m = _solution("shared")
    assert c["global_load_requests"] == 32 * 2
    assert m["sectors_per_load"] == 4.0 and m["sectors_per_store"] == 4.0
    assert c["shared_load_requests"] == 32 * 32 * 2
    assert c["shared_load_conflicts"] == 0 and c["shared_store_conflicts"] == 0
    assert m["global_loads_per_fma"] == pytest.approx(2 / 32)  # a tile saves 32 loads
    assert m["shared_loads_per_fma"] == 2.0


def test_column_reads_of_a_shared_tile_conflict_unless_padded():
    x = to_device(np.arange(S * S, dtype=np.float32).reshape(S, S))
    out = to_device(np.zeros(S, np.float32))
    column = _count(lambda: tile_reads[1, (S, S)](x, out, False))["tile_reads"]
    # Only warp 0 (ty == 0) reads: S requests of 32 words in one bank, 31 conflicts each.
    assert column["shared_load_requests"] == S
    assert column["shared_load_conflicts"] == S * 31
    assert column["shared_store_conflicts"] == 0  # the row-wise stores
    padded = _count(lambda: tile_reads[1, (S, S)](x, out, True))["tile_reads"]
    assert padded["shared_load_requests"] == S
    assert padded["shared_load_conflicts"] == 0


def test_a_kernel_launched_twice_adds_up_and_counting_ends_with_the_block():
    x = to_device(np.ones((S, S), np.float32))
    out = to_device(np.zeros(S, np.float32))
    counter = memcount.Counter()
    with simcheck.instrument(counter=counter):
        tile_reads[1, (S, S)](x, out, False)
        tile_reads[1, (S, S)](x, out, False)
    c = counter.kernels["tile_reads"]
    assert c.launches == 2
    assert c.shared_load_conflicts == 2 * S * 31
    # Outside instrument(), nothing is counted.
    tile_reads[1, (S, S)](x, out, False)
    assert counter.kernels["tile_reads"].launches == 2


def test_only_threads_that_store_are_counted_as_storing():
    """A 20 x 20 C on one 32 x 32 block: 1,024 threads launch, the 400 inside C store."""
    A, B, C = (to_device(np.ones((20, 4), np.float32)), to_device(np.ones((4, 20), np.float32)),
               to_device(np.zeros((20, 20), np.float32)))
    c = _count(lambda: naive_rows_on_x[(1, 1), (S, S)](A, B, C))["naive_rows_on_x"]
    assert c["threads"] == S * S and c["storing_threads"] == 20 * 20


F32 = np.dtype(np.float32)


@cuda.jit
def dynamic_tile_reads(x, out):
    """The row sums of tile_reads, the tile in dynamic shared memory (padded rows)."""
    tile = cuda.shared.array(0, F32)  # a dtype, not the class: the bare simulator needs one
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty * (S + 1) + tx] = x[ty, tx]
    cuda.syncthreads()
    if ty == 0:
        acc = np.float32(0.0)
        for k in range(S):
            acc += tile[tx * (S + 1) + k]
        out[tx] = acc


def test_dynamic_shared_memory_is_counted_as_shared_memory():
    """The version rule asks for shared loads: a kernel whose tiles sit in dynamic shared
    memory shows them (and its bank conflicts) as a static array's do."""
    x = to_device(np.arange(S * S, dtype=np.float32).reshape(S, S))
    out = to_device(np.zeros(S, np.float32))
    nbytes = S * (S + 1) * 4
    c = _count(lambda: dynamic_tile_reads[1, (S, S), 0, nbytes](x, out))["dynamic_tile_reads"]
    assert c["shared_store_requests"] == S and c["shared_store_accesses"] == S * S
    assert c["shared_load_requests"] == S and c["shared_load_accesses"] == S * S
    assert c["shared_load_conflicts"] == 0  # padded: lane tx's word in bank (tx + k) % 32
    assert np.allclose(out.copy_to_host(), np.arange(S * S).reshape(S, S).sum(axis=1))


def test_the_solutions_tiles_return_every_element_of_a_and_b_from_shared_memory():
    """The version rule's operand count: a tiled kernel's shared loads return every
    element of A and B; the naive kernel's, none (it has no shared memory)."""
    case = profile_case("shared")
    ops = build_operands(case, 1)
    A, B, C = ops.views(tuple(to_device(b) for b in (ops.A_buf, ops.B_buf, ops.C_buf)))
    host_a, host_b, _ = ops.views()
    for kernel, share in (("shared", 1.0), ("naive", 0.0)):
        counter = memcount.Counter()
        counter.watch_operands(host_a, host_b, case.alpha)
        launch = load_function(NAMED["solution"], *KERNELS[kernel])
        with simcheck.instrument(counter=counter):
            gemm(launch, A, B, C, case.alpha, case.beta)
        (c,) = counter.to_json().values()
        assert c["operand_elements"] == host_a.size + host_b.size
        assert c["shared_operand_elements"] == share * c["operand_elements"]


@cuda.jit
def own_slot_roundtrip(A, out):
    """Each thread parks the elements of A it loads in a shared slot of its own and reads
    them back: nothing is shared between threads (a red team's, round seven)."""
    slot = cuda.shared.array(S, np.float32)
    t = cuda.threadIdx.x
    acc = np.float32(0.0)
    for k in range(A.shape[1]):
        slot[t] = A[t, k]
        acc += slot[t]
    out[t] = acc


@cuda.jit
def two_tiles_in_dynamic_slices(A, out):
    """Two tiles cut out of dynamic shared memory by slicing (as numba's documentation
    does); each thread reads a neighbour's element of each."""
    smem = cuda.shared.array(0, F32)
    first, second = smem[:S], smem[S:2 * S]
    t = cuda.threadIdx.x
    first[t] = A[t, 0]
    second[t] = A[t, 1]
    cuda.syncthreads()
    out[t] = first[(t + 1) % S] + second[(t + 1) % S]


def test_only_loads_of_what_another_thread_stored_count_as_operands():
    host_a = np.random.default_rng(5).random((S, 2), dtype=np.float32)
    A, out = to_device(host_a), to_device(np.zeros(S, np.float32))
    counts = {}
    for kernel, args in ((own_slot_roundtrip, ()), (two_tiles_in_dynamic_slices, (0, 8 * S))):
        counter = memcount.Counter()
        counter.watch_operands(host_a, np.zeros((0, 0), np.float32), 1.0)
        with simcheck.instrument(counter=counter):
            kernel[(1,), (S,), *args](A, out)
        (counts[kernel.__name__],) = counter.to_json().values()
    assert counts["own_slot_roundtrip"]["shared_load_accesses"] == 2 * S
    assert counts["own_slot_roundtrip"]["shared_operand_elements"] == 0
    assert counts["two_tiles_in_dynamic_slices"]["shared_operand_elements"] == 2 * S
