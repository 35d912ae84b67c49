"""Device-resident data parallelism (nnkit.device_parallel, nnkit.device_reduce,
nnkit.nccl_transport): the reduction's arithmetic with NumPy stand-ins, the loop on CPU
ranks (NumPy arrays, MPI in place of NCCL), and on one GPU with NCCL (`-m gpu`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nnkit import collectives, network
from nnkit.collectives import find_mpiexec, mpiexec_command, rank_environment
from nnkit.device_parallel import ResidentNet
from nnkit.device_reduce import (
    FlatLayout,
    chunk_bounds,
    rank_rows,
    ring_bytes,
    ring_steps,
    shares,
    simulate_ring,
    weighted_sum,
)
from tests.conftest import KIT_ROOT, run_kit

# Part 2's criterion for a trained network against the CPU reference: relative max-norm
# of the difference of every W and b after two epochs in float32.
TOL = 1e-4
EPS = 2.0 ** -24  # float32 unit roundoff
needs_mpi = pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec")


def _mpirun(ranks: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = rank_environment()
    # The kit first; keep what the caller put on the path (a GPU image's numpy, say).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(KIT_ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([*mpiexec_command(ranks), sys.executable, *args], cwd=KIT_ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------------------------
# The arithmetic, in one process


def test_rank_rows_follow_split_counts_and_cover_the_batch():
    assert [rank_rows(20, 3, r) for r in range(3)] == [(0, 7), (7, 14), (14, 20)]
    assert [rank_rows(1, 4, r) for r in range(4)] == [(0, 1), (1, 1), (1, 1), (1, 1)]
    assert shares([7, 7, 6]) == [0.35, 0.35, 0.3]
    with pytest.raises(ValueError):
        shares([0, 0])


def test_flat_layout_packs_layers_contiguously():
    params = network.glorot_uniform([5, 4, 3], seed=1)
    layout = FlatLayout((5, 4, 3))
    flat = layout.pack(params.weights, params.biases)
    assert layout.size == 4 * 5 + 4 + 3 * 4 + 3 == flat.size
    assert layout.segment(0) == slice(0, 24) and layout.segment(1) == slice(24, 39)
    W, b = layout.views(flat)
    for got, want in zip(W + b, params.weights + params.biases, strict=True):
        np.testing.assert_array_equal(got, want)
    W[1][0, 0] = 42.0  # views, not copies
    assert flat[24] == 42.0


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("length", [1, 2, 7, 1001])
def test_ring_schedule_sums_every_chunk_on_every_rank(size, length):
    rng = np.random.default_rng(size * 1000 + length)
    buffers = [rng.uniform(-1, 1, length).astype(np.float32) for _ in range(size)]
    out = simulate_ring(buffers)
    exact = np.sum(np.array(buffers, np.float64), axis=0)
    # p - 1 float32 additions of values in [-1, 1]: |error| <= (p - 1) * p * eps.
    bound = max(size - 1, 0) * size * EPS
    for o in out:
        np.testing.assert_array_equal(o, out[0])  # every rank the same bits
        assert np.abs(o - exact).max() <= bound
    # Each rank sends each chunk but one once in each phase: 2 (p - 1)/p of the buffer.
    if size > 1 and length % size == 0:
        assert ring_bytes(length, size) == 4 * 2 * (size - 1) * length // size
    assert ring_bytes(length, size) <= 4 * 2 * (size - 1) * (length // size + 1)


def test_ring_steps_send_what_the_left_neighbour_receives():
    for size in (2, 3, 4):
        for number in range(2 * (size - 1)):
            for r in range(size):
                mine = ring_steps(r, size)[number]
                left = ring_steps((r - 1) % size, size)[number]
                assert mine.recv == left.send
    assert chunk_bounds(7, 3) == [0, 3, 5, 7] and chunk_bounds(2, 4) == [0, 1, 2, 2, 2]


def _rank_gradients(params, X, y, counts):
    """Each rank's scaled gradient from ResidentNet (NumPy), as the ranks would hold it."""
    grads, lo = [], 0
    for c in counts:
        net = ResidentNet(np, params, lam=1e-3)
        steps = net.backward(net.forward(X[lo:lo + c]), y[lo:lo + c], len(y))
        layers = []
        try:
            while True:
                layers.append(next(steps))
        except StopIteration:
            pass
        assert layers == list(range(net.layout.layers - 1, -1, -1))  # top layer first
        grads.append(net.grad.copy())
        lo += c
    return grads


@pytest.mark.parametrize("counts", [[7, 7, 6], [1, 0, 0, 0], [20], [5, 15]])
def test_scaled_shard_gradients_sum_to_the_batch_gradient(counts):
    """Uneven shards, and ranks with no rows: sum_r share_r * g_r is the gradient of the
    whole batch, L2 term included exactly once."""
    rng = np.random.default_rng(len(counts))
    params = network.glorot_uniform([6, 5, 4], seed=2)
    n = sum(counts)
    X = rng.uniform(0, 1, (n, 6)).astype(np.float32)
    y = rng.integers(0, 4, n).astype(np.int64)
    grads = _rank_gradients(params, X, y, counts)
    summed = np.sum(grads, axis=0)  # the devices' plain sum of already scaled gradients
    full, _ = network.backward(params.copy(np.float64), network.forward(
        params.copy(np.float64), X.astype(np.float64)), y, 1e-3)
    want = FlatLayout((6, 5, 4)).pack(full.weights, full.biases).astype(np.float64)
    scale = np.abs(want).max()
    # A few float32 roundings per product of length <= 20, relative to the largest entry.
    assert np.abs(summed - want).max() <= 64 * EPS * scale
    # ... and weighted_sum of unscaled means is the same thing (the oracle's own check).
    means = [g / s if s else g for g, s in zip(grads, shares(counts), strict=True)]
    assert np.abs(weighted_sum(means, counts) - want).max() <= 64 * EPS * scale
    if len(counts) > 1 and counts[0] != counts[1]:
        # A plain average of the ranks' means is wrong for uneven shards.
        assert np.abs(np.mean(means, axis=0) - want).max() > 1e-3 * scale


def test_resident_net_forward_is_the_reference_forward():
    params = network.glorot_uniform([6, 5, 4, 3], seed=3)
    X = np.random.default_rng(0).uniform(0, 1, (9, 6)).astype(np.float32)
    got = ResidentNet(np, params, lam=0.0).forward(X)
    for a, b in zip(got, network.forward(params, X), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=32 * EPS)


def test_without_cupy_the_engine_says_what_is_missing(monkeypatch):
    from nnkit import nccl_transport

    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    with pytest.raises(nccl_transport.NcclUnavailable, match="CuPy is not installed"):
        nccl_transport.load_nccl()


# ---------------------------------------------------------------------------------------
# The loop on CPU ranks (NumPy arrays, MPI in place of NCCL)


def _scenarios(tmp_path, ranks: int, device: str) -> dict:
    out = tmp_path / f"device-{device}.json"
    done = _mpirun(ranks, "tests/device_scenarios.py", str(out), device)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def cpu_scenarios(tmp_path_factory):
    if find_mpiexec() is None:
        pytest.skip("no mpiexec")
    return _scenarios(tmp_path_factory.mktemp("device"), 4, "cpu")


def _check(results: dict, ranks: int) -> None:
    assert len(results["training"]) == 4 * ranks
    for key, error in results["training"].items():
        assert error <= TOL, key
    for key, diff in results["loss"].items():
        assert diff <= TOL, key  # the epoch losses reported on the way, too
    for key, check in results["ring"].items():
        assert check["same_as_simulation"], key
    assert set(results["profile"]) == {"compute", "idle", "reduce", "step"}
    assert results["exchange"]  # each rank got its left neighbour's chunk


def test_resident_training_on_cpu_ranks_equals_one_process(cpu_scenarios):
    """1-4 ranks, NCCL's all-reduce and the ring, with and without per-layer overlap."""
    _check(cpu_scenarios, 4)
    assert "stand-in" in cpu_scenarios["describe"]
    one, three = (cpu_scenarios["bytes"][f"ring, overlap True, {p} ranks"] for p in (1, 3))
    assert one == 0 and three > 0


def test_collectives_split_is_the_engines_split():
    for n, p in ((800, 3), (1, 4), (20, 3)):
        counts = collectives.split_counts(n, p)
        assert [hi - lo for lo, hi in (rank_rows(n, p, r) for r in range(p))] == counts


@needs_mpi
def test_bench_mpi_resident_mode_on_cpu_ranks(tmp_path):
    out = tmp_path / "bench.json"
    done = run_kit("nnkit", "bench-mpi", "--ranks", "1,2", "--modes", "resident",
                   "--data", "sample", "--limit", "90", "--pool", "4", "--hidden", "8",
                   "--batch", "20", "--epochs", "1", "--repeats", "2", "--json", str(out),
                   timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "where a step's time goes" in done.stdout
    results = json.loads(out.read_text())["results"]
    assert [(r["mode"], r["ranks"]) for r in results] == [("resident", 1), ("resident", 2)]
    assert results[0]["bytes_per_step"][0] == 0 and results[1]["bytes_per_step"][0] > 0
    assert set(results[1]["profile"]) >= {"compute", "idle", "reduce"}


SMALL = ["--data", "sample", "--limit", "90", "--pool", "4", "--hidden", "8", "--batch", "20",
         "--epochs", "2", "--lr", "0.5", "--lam", "1e-3"]


def _saved(path):
    with np.load(path) as f:
        return network.Params([f["W1"], f["W2"]], [f["b1"], f["b2"]])


@needs_mpi
def test_train_resident_without_a_gpu_says_why_on_every_rank():
    from nnkit.backend import probe_gpu

    if probe_gpu()[0]:
        pytest.skip("this machine has a GPU with CuPy")
    done = _mpirun(2, "-m", "nnkit", "train", "--mpi", "--resident", *SMALL, timeout=120)
    assert done.returncode == 2
    assert "--resident" in done.stderr and "host-staged" in done.stderr
    assert done.stderr.count("nnkit train --mpi --resident:") == 1  # rank 0 speaks


# ---------------------------------------------------------------------------------------
# On a GPU: NCCL through CuPy, one rank (NCCL wants a GPU of its own for every rank)


@pytest.mark.gpu
def test_resident_training_on_one_gpu_with_nccl_equals_one_process(tmp_path):
    results = _scenarios(tmp_path, 1, "gpu")
    assert "NCCL" in results["describe"]
    _check(results, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("ranks", [2, 4])
def test_resident_training_on_several_gpus_with_nccl_equals_one_process(tmp_path, ranks):
    """One rank per GPU: NCCL's all-reduce and the device ring across GPUs."""
    from nnkit.backend import device_count

    if device_count()[0] < ranks:
        pytest.skip(f"needs {ranks} GPUs (a multi-GPU machine)")
    results = _scenarios(tmp_path, ranks, "gpu")
    assert "NCCL" in results["describe"]
    _check(results, ranks)


@pytest.mark.gpu
def test_two_ranks_on_one_gpu_are_refused_clearly(tmp_path):
    from nnkit.backend import device_count

    if device_count()[0] != 1:
        pytest.skip("checks the refusal on a machine with exactly one GPU")
    done = _mpirun(2, "tests/device_scenarios.py", str(tmp_path / "x.json"), "gpu",
                   timeout=120)
    assert done.returncode != 0
    assert "one GPU per rank" in done.stderr


@pytest.mark.gpu
def test_train_command_resident_on_one_gpu_matches_the_reference(tmp_path):
    from nnkit import dataset
    from nnkit.training import TrainConfig
    from tests.serial_reference import serial_reference

    done = _mpirun(1, "-m", "nnkit", "train", "--mpi", "--resident", *SMALL, "--save",
                   str(tmp_path / "resident.npz"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "NCCL" in done.stderr and "test accuracy" in done.stdout
    # The same run in this process with the CPU reference (SMALL's settings).
    config = TrainConfig(hidden=(8,), batch=20, epochs=2, lr=0.5, lam=1e-3)
    data = dataset.load("sample", 0.1, 0, 4, 90)
    want, _ = serial_reference(data, config,
                               network.glorot_uniform(config.sizes(data.features), 0))
    got = _saved(tmp_path / "resident.npz")
    for a, b in zip(got.weights + got.biases, want.weights + want.biases, strict=True):
        assert np.abs(a - b).max() <= TOL * np.abs(b).max()
