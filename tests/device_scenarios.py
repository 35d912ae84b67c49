"""Run by tests/kit/test_device_parallel.py as
`mpiexec -n P python tests/device_scenarios.py OUT.json cpu|gpu`.

The device-resident loop (nnkit.device_parallel) on communicators of 1 to P ranks, with
NumPy arrays and MPI between ranks (cpu) or CuPy arrays and NCCL (gpu), against
single-process training with the CPU reference; and the ring over the transport against
its one-process simulation. Rank 0 writes what it measured; the tests decide.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
from mpi4py import MPI

from nnkit import dataset, network
from nnkit.device_parallel import array_module, make_transport, train_resident
from nnkit.device_reduce import ring_allreduce, simulate_ring
from nnkit.training import TrainConfig
from tests.serial_reference import serial_reference

WORLD = MPI.COMM_WORLD
RANK = WORLD.Get_rank()
# 81 training images in batches of 20: 20 rows over 3 ranks are 7, 7, 6, and the last
# batch of 1 row leaves ranks with no rows at all (weight 0).
DATA = dataset.load("sample", 0.1, 0, 4, 90)
CONFIG = TrainConfig(hidden=(8,), batch=20, epochs=2, lr=0.5, lam=1e-3)


def on_ranks(p: int) -> Any:
    comm = WORLD.Split(0 if RANK < p else MPI.UNDEFINED, RANK)
    return None if comm == MPI.COMM_NULL else comm


def relative(a: network.Params, b: network.Params) -> float:
    return max(float(np.abs(x - y).max() / np.abs(y).max())
               for x, y in zip(a.weights + a.biases, b.weights + b.biases, strict=True))


def main(out: str, device: str) -> int:
    params = network.glorot_uniform(CONFIG.sizes(DATA.features), 0)
    reference, serial_losses = serial_reference(DATA, CONFIG, params)
    results: dict = {"training": {}, "loss": {}, "ring": {}, "bytes": {}}
    for p in range(1, WORLD.Get_size() + 1):
        comm = on_ranks(p)
        if comm is None:
            WORLD.Barrier()
            continue
        transport = make_transport(comm, device)
        xp = array_module(transport)
        if RANK == 0:
            results["describe"] = transport.describe()
        for reduce in ("allreduce", "ring"):
            for overlap in (True, False):
                net, history = train_resident(comm, transport, xp, DATA.train.images,
                                              DATA.train.labels, params, CONFIG,
                                              reduce=reduce, overlap=overlap,
                                              profile=overlap and reduce == "ring")
                got = net.host_params()
                worst = comm.allreduce(relative(got, reference), op=MPI.MAX)
                if RANK == 0:
                    key = f"{reduce}, overlap {overlap}, {p} ranks"
                    results["training"][key] = worst
                    results["loss"][key] = max(abs(a.loss - b) for a, b in
                                               zip(history.epochs, serial_losses, strict=True))
                    results["bytes"][key] = history.bytes_per_step
                    if history.profile:
                        results["profile"] = history.profile
        # The ring over the transport, step for step the simulation (same additions).
        for length in (1, 5, 1001):
            mine = np.random.default_rng(100 * p + comm.Get_rank()).uniform(
                -1, 1, length).astype(np.float32)
            everyone = comm.allgather(mine)
            buf = xp.asarray(mine)
            transport.after_compute()  # NCCL's stream waits for the copy onto the device
            sent = ring_allreduce(transport, buf, xp.empty(length, xp.float32))
            transport.synchronize()
            got = buf.get() if hasattr(buf, "get") else buf
            same = all(comm.allgather(bool(np.array_equal(got, simulate_ring(everyone)[0]))))
            if RANK == 0:
                results["ring"][f"{length} over {p}"] = {"same_as_simulation": same,
                                                         "bytes": sent}
        # One exchange by itself: with one rank it is a send to oneself (NCCL allows it in
        # a group), the only way one GPU exercises the ring's send/recv.
        outgoing = xp.arange(7, dtype=xp.float32) + comm.Get_rank()
        incoming = xp.zeros(7, xp.float32)
        transport.after_compute()
        transport.exchange(outgoing, incoming)
        transport.synchronize()
        arrived = incoming.get() if hasattr(incoming, "get") else incoming
        left = (comm.Get_rank() - 1) % p
        ok = all(comm.allgather(bool(np.array_equal(arrived, np.arange(7) + left))))
        if RANK == 0:
            results["exchange"] = results.get("exchange", True) and ok
        comm.Free()
        WORLD.Barrier()
    if RANK == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
