"""Part 3 on CPU ranks: the kit's and the solution's MPI code under mpiexec with 1-4 ranks,
the train --mpi command, the benchmark, and the pieces that need no MPI job at all."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from nnkit import collectives
from nnkit.collectives import find_mpiexec, mpiexec_command, rank_environment
from tests.conftest import KIT_ROOT, run_kit

TOL = 1e-4  # Part 2's criterion: relative max-norm of the difference of every W and b
needs_mpi = pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec")


def _mpirun(ranks: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**rank_environment(), "PYTHONPATH": str(KIT_ROOT)}
    return subprocess.run([*mpiexec_command(ranks), sys.executable, *args], cwd=KIT_ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------------------------
# Without MPI


def test_split_counts_follow_cme213():
    assert collectives.split_counts(800, 3) == [267, 267, 266]
    assert collectives.split_counts(1, 4) == [1, 0, 0, 0]
    assert collectives.split_counts(8, 4) == [2, 2, 2, 2]
    assert collectives.offsets([267, 267, 266]) == [0, 267, 534]


def test_pack_and_unpack_round_trip():
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4, np.float32)]
    flat = collectives.pack(arrays, 0.5)
    assert flat.dtype == np.float32 and flat.size == 10
    back = collectives.unpack(flat, arrays)
    assert [b.shape for b in back] == [(2, 3), (4,)]
    np.testing.assert_array_equal(back[0], arrays[0] * 0.5)


@pytest.mark.parametrize("strategy,ranks", [("butterfly", 4), ("butterfly", 8),
                                            ("hopping", 4), ("hopping", 8)])
def test_log2_p_mixing_rounds_give_the_average(strategy, ranks):
    """For p a power of two, log2 p rounds of either mixing reach the exact mean (a few
    roundings of halving sums of values in [-1, 1] away)."""
    rng = np.random.default_rng(ranks)
    buffers = [rng.uniform(-1, 1, 50).astype(np.float32) for _ in range(ranks)]
    mixed = buffers
    for stage in range(collectives.log2_ranks(ranks)):
        mixed = collectives.simulate_mix(strategy, mixed, stage)
    mean = np.mean(np.array(buffers, dtype=np.float64), axis=0)
    for m in mixed:
        assert np.abs(m - mean).max() <= 8 * 2.0 ** -24
    one_round = collectives.simulate_mix(strategy, buffers, 0)
    assert np.abs(one_round[0] - mean).max() > 1e-3  # one round alone only mixes pairs


def test_butterfly_rejects_other_rank_counts():
    with pytest.raises(ValueError, match="power-of-two"):
        collectives.simulate_mix("butterfly", [np.zeros(2, np.float32)] * 3, 0)


def test_counting_comm_counts_point_to_point_and_collectives():
    class Fake:
        def Get_size(self):
            return 4

        def Get_rank(self):
            return 0

        def Send(self, buf, dest, tag=0):
            return None

        def Scatterv(self, send, recv, root=0):
            return None

        def Allreduce(self, send, recv, op=None):
            return None

    counted = collectives.CountingComm(Fake())
    counted.Send(np.zeros(10, np.float32), dest=1)
    assert counted.bytes_sent == 40
    counted.Scatterv([np.zeros(10, np.float32), [4, 2, 2, 2], [0, 4, 6, 8], None], None, root=0)
    assert counted.bytes_sent == 40 + 6 * 4  # the rows that leave the root
    counted.Allreduce(None, np.zeros(100, np.float32))
    assert counted.bytes_sent == 64 + 2 * 3 * 400 // 4
    assert counted.calls == {"Send": 1, "Scatterv": 1, "Allreduce": 1}


def test_the_rings_requests_are_counted_until_completed_and_not_freed_early():
    """call_point_to_point counts the requests left incomplete (an Isend never waited
    on), and a request freed before it completes raises (its buffer is still MPI's)."""
    MPI = pytest.importorskip("mpi4py.MPI")
    small, big = np.arange(4, dtype=np.float32), np.arange(300_000, dtype=np.float32)

    def forgets(comm, buffer):
        comm.Isend(buffer, dest=0, tag=1)
        comm.Recv(np.empty_like(buffer), source=0, tag=1)

    def waits(comm, buffer):
        request = comm.Isend(buffer, dest=0, tag=2)
        comm.Recv(np.empty_like(buffer), source=0, tag=2)
        MPI.Request.Waitall([request])

    def frees(comm, buffer):
        request = comm.Isend(buffer, dest=0, tag=3)
        try:
            request.Free()
        finally:
            comm.Recv(np.empty_like(buffer), source=0, tag=3)
            request.Wait()

    assert collectives.call_point_to_point(forgets, MPI.COMM_SELF, small)["pending"] == 1
    assert collectives.call_point_to_point(waits, MPI.COMM_SELF, big)["pending"] == 0
    with pytest.raises(RuntimeError, match="has not completed"):
        collectives.call_point_to_point(frees, MPI.COMM_SELF, big)


def test_the_kits_communicators_pass_isinstance_tests_as_intracommunicators():
    """A student's `assert isinstance(comm, MPI.Intracomm)` holds for every communicator
    the kit hands to graded code, while type() and mpi4py's own checks see the proxy."""
    MPI = pytest.importorskip("mpi4py.MPI")
    counting = collectives.CountingComm(MPI.COMM_SELF)
    proxy, _ = collectives.counting_proxy(MPI.COMM_SELF)
    ring = collectives.PointToPointComm()
    for comm in (counting, proxy, ring, collectives.CountingComm(proxy)):
        assert isinstance(comm, MPI.Intracomm) and isinstance(comm, MPI.Comm)
        assert not isinstance(comm, MPI.Intercomm) and type(comm) is not MPI.Intracomm
        with pytest.raises(TypeError):
            MPI.Intracomm(comm)  # a copy of the real communicator: still refused
    assert counting.Get_size() == proxy.Get_size() == 1


@pytest.mark.parametrize("version, wanted, unwanted", [
    ("mpiexec (OpenRTE) 4.1.6", ["--oversubscribe", "isolated"], []),
    ("mpiexec (Open MPI) 5.0.3", ["--oversubscribe"], ["isolated"]),
    ("HYDRA build details:", [], ["--oversubscribe", "isolated"]),
])
def test_mpiexec_flags_follow_the_mpi(tmp_path, version, wanted, unwanted):
    """Open MPI 4 stops when no ssh is installed, even for local ranks (seen on a GPU
    machine): the kit asks for its local launcher there. MPICH needs no flags."""
    fake = tmp_path / "mpiexec"
    fake.write_text(f"#!/bin/sh\necho '{version}'\n")
    fake.chmod(0o755)
    command = mpiexec_command(3, str(fake))
    assert command[:3] == [str(fake), "-n", "3"]
    for flag in wanted:
        assert flag in command
    for flag in unwanted:
        assert flag not in command


def test_rank_environment_drops_an_enclosing_job():
    env = rank_environment({"PMI_RANK": "3", "PMI_FD": "7", "HYDRA_CONTROL_FD": "5",
                            "PATH": "/bin", "OMP_NUM_THREADS": "8"})
    assert env["PATH"] == "/bin" and env["OMP_NUM_THREADS"] == "1"
    assert not any(k.startswith(("PMI_", "HYDRA_")) for k in env)


# ---------------------------------------------------------------------------------------
# One MPI job of 4 ranks running every scenario (tests/mpi_scenarios.py)


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    if find_mpiexec() is None:
        pytest.skip("no mpiexec")
    out = tmp_path_factory.mktemp("mpi") / "scenarios.json"
    done = _mpirun(4, "tests/mpi_scenarios.py", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def test_scatter_splits_unevenly_on_1_to_4_ranks(scenarios):
    assert scenarios["scatter"]["solution"] and scenarios["scatter"]["kit"]
    assert scenarios["scatter"]["solution 800 over 3"] == [267, 267, 266]
    assert scenarios["scatter"]["kit 800 over 3"] == [267, 267, 266]


@pytest.mark.parametrize("impl", ["solution", "kit"])
def test_ring_allreduce_equals_allreduce_to_float32_rounding(scenarios, impl):
    ring = scenarios["ring"][impl]
    assert ring["error_over_bound"] <= 1.0
    assert ring["vs_allreduce_over_bound"] <= 2.0  # both within the bound of the exact sum
    assert ring["bytes_and_calls_ok"]  # 2 (p-1)/p of the buffer, point-to-point only


def test_mixing_over_mpi_is_the_simulation_bit_for_bit(scenarios):
    mixing = scenarios["mixing"]
    assert all(m["same_as_simulation"] for m in mixing.values())
    for key in ("butterfly 2", "butterfly 4", "hopping 2", "hopping 4"):
        assert mixing[key]["distance_from_mean"] <= 8 * 2.0 ** -24
    assert mixing["hopping 3"]["distance_from_mean"] > 1e-3  # not exact off powers of two


@pytest.mark.parametrize("name", [
    *[f"data parallel, kit, {p} ranks" for p in (1, 2, 3, 4)],
    "data parallel, solution, 3 ranks", "data parallel, solution ring, 3 ranks",
    "data parallel, kit ring, 4 ranks",
    *[f"model parallel, {p} ranks" for p in (1, 2, 3, 4)],
    "averaging k=1, 3 ranks",
])
def test_parallel_training_equals_one_process(scenarios, name):
    assert scenarios["training"][name] <= TOL


@pytest.mark.parametrize("name", ["k=2 allreduce, 3 ranks", "k=3 ring, 2 ranks",
                                  "k=2 butterfly, 4 ranks", "k=2 hopping, 3 ranks"])
def test_model_averaging_equals_its_serial_simulation(scenarios, name):
    training = scenarios["training"]
    assert training[f"averaging {name}"] <= TOL
    # ... and averaging every k > 1 minibatches really is another algorithm:
    assert training[f"simulated averaging {name} vs serial"] > 100 * TOL


# ---------------------------------------------------------------------------------------
# The train command and the benchmark

SMALL = ["--data", "sample", "--limit", "90", "--pool", "4", "--hidden", "8", "--batch", "20",
         "--epochs", "2", "--lr", "0.5", "--lam", "1e-3"]


def _saved(path):
    with np.load(path) as f:
        return {k: f[k] for k in ("W1", "b1", "W2", "b2")}


def _relative(a, b):
    return max(float(np.abs(a[k] - b[k]).max() / np.abs(b[k]).max()) for k in b)


@needs_mpi
def test_train_mpi_matches_single_process_training(tmp_path):
    single = run_kit("nnkit", "train", "--impl", "reference", *SMALL, "--save",
                     str(tmp_path / "one.npz"))
    assert single.returncode == 0, single.stderr[-2000:]
    done = _mpirun(3, "-m", "nnkit", "train", "--mpi", "--impl", "reference", *SMALL,
                   "--save", str(tmp_path / "three.npz"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 rank(s)" in done.stderr and "test accuracy" in done.stdout
    assert done.stdout.count("epoch ") == 2  # rank 0 prints; the others stay quiet
    assert _relative(_saved(tmp_path / "three.npz"), _saved(tmp_path / "one.npz")) <= TOL


@pytest.mark.slow
@needs_mpi
def test_train_mpi_with_the_solutions_network_in_the_simulator(tmp_path):
    """The device path: Part 2's backward on each rank's device (the simulator here),
    gradients copied to the host, combined, copied back, Part 2's SGD step."""
    small = ["--data", "sample", "--limit", "60", "--pool", "4", "--hidden", "8", "--batch",
             "20", "--epochs", "1", "--lr", "0.5", "--lam", "1e-3"]  # 54 images, 3 steps
    single = run_kit("nnkit", "train", "--impl", "reference", *small, "--save",
                     str(tmp_path / "one.npz"))
    assert single.returncode == 0, single.stderr[-2000:]
    done = _mpirun(2, "-m", "nnkit", "train", "--mpi", "--impl", "solution", "--gemm", "host",
                   *small, "--save", str(tmp_path / "two.npz"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "solution's network" in done.stderr
    assert _relative(_saved(tmp_path / "two.npz"), _saved(tmp_path / "one.npz")) <= TOL


@needs_mpi
def test_train_mpi_refuses_bad_options_on_every_rank_without_hanging():
    done = _mpirun(2, "-m", "nnkit", "train", "--mpi", "--impl", "reference", *SMALL,
                   "--reduce", "butterfly", timeout=60)
    assert done.returncode != 0
    assert "--average-every" in done.stderr


@pytest.mark.slow
@needs_mpi
def test_bench_mpi_table_plot_and_bytes(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    done = run_kit("nnkit", "bench-mpi", "--ranks", "1,2", "--modes", "data,model",
                   "--reduce", "ring", "--data", "sample", "--limit", "90", "--pool", "4",
                   "--hidden", "8", "--batch", "20", "--epochs", "1", "--repeats", "2",
                   "--json", str(out), "--plot", str(png), timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "speedup" in done.stdout and "MPI Allreduce" in done.stdout
    assert png.stat().st_size > 10_000
    results = json.loads(out.read_text())["results"]
    assert [(r["mode"], r["ranks"]) for r in results] == [
        ("data", 1), ("data", 2), ("model", 1), ("model", 2)]
    for r in results:
        # Point-to-point bytes (ring) and the root's scatter, counted as they are sent,
        # equal the handout's formulas.
        assert r["bytes_per_step"][0] == pytest.approx(r["formula"][0], rel=1e-6)
        assert r["bytes_per_step"][-1] == pytest.approx(r["formula"][1], rel=1e-6)
    assert results[1]["bytes_per_step"][0] > 0 and results[0]["bytes_per_step"][0] == 0
