"""The ranks' link on GPUs: NCCL through CuPy, bootstrapped through mpi4py.

NCCL needs every rank to call ncclCommInitRank with the same 128-byte unique id; rank 0
makes it (nccl.get_unique_id) and MPI broadcasts it. That is all MPI does here: after the
bootstrap, gradients go GPU to GPU (NVLink, PCIe, or InfiniBand between nodes with
GPUDirect), never through the host. The same program runs on one node under mpiexec and
across nodes under a cluster's launcher (srun --mpi=pmix -n 8 --gpus-per-task=1 ...).

Everything NCCL does is queued on the transport's own stream, created non-blocking so that
it does not serialise with the legacy default stream the network computes on: a layer's
gradient can be summed while the next layer's is computed. after_compute() and
before_compute() put CUDA events between the two streams.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Any


class NcclUnavailable(RuntimeError):
    """CuPy, a GPU or NCCL is missing: the device-resident engine cannot run."""


def _preload_pip_nccl() -> None:
    """Make the NCCL of the nvidia-nccl-cu* wheel (which PyTorch also installs) visible to
    CuPy when no system NCCL is on the loader's path."""
    import ctypes

    for root in sys.path:
        for lib in sorted(glob.glob(os.path.join(root, "nvidia", "nccl", "lib",
                                                 "libnccl.so*"))):
            try:
                ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                return
            except OSError:
                continue


def load_nccl() -> Any:
    """cupy.cuda.nccl, or NcclUnavailable saying what is missing and how to get it."""
    try:
        import cupy
    except ImportError:
        raise NcclUnavailable("CuPy is not installed (pip install -e '.[gpu]'): the "
                              "device-resident engine needs CuPy and NCCL; without a GPU use "
                              "the host-staged path (nnkit train --mpi)") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # noqa: BLE001 - CUDA's own error says why
        raise NcclUnavailable(f"no usable GPU ({err})") from None
    if count == 0:
        raise NcclUnavailable("no GPU")
    _preload_pip_nccl()
    try:
        from cupy.cuda import nccl
    except ImportError as err:
        raise NcclUnavailable(f"CuPy cannot load NCCL ({err}); install it (pip install "
                              "nvidia-nccl-cu13, or the site's NCCL on LD_LIBRARY_PATH)") \
            from None
    if not getattr(nccl, "available", True):
        raise NcclUnavailable("this CuPy was built without NCCL; install NCCL (pip install "
                              "nvidia-nccl-cu13) or a CuPy wheel that finds it")
    return nccl


def bind_gpu(comm: Any) -> tuple[int, int]:
    """Rank r of a node takes GPU r mod count (count as this process sees them: under
    srun --gpus-per-task=1 every task sees one GPU, its own). Returns (device, count)."""
    import cupy
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    local_rank = node.Get_rank()
    node.Free()
    count = cupy.cuda.runtime.getDeviceCount()
    device = local_rank % count
    cupy.cuda.Device(device).use()
    return device, count


class NcclTransport:
    """Sums and ring exchanges of CuPy float32 arrays between the ranks of an MPI
    communicator, one GPU each, through NCCL on a stream of their own."""

    def __init__(self, comm: Any):
        self.nccl = load_nccl()  # first: says what is missing before anything needs it
        import cupy

        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        device, count = bind_gpu(comm)
        # A clear refusal instead of NCCL's "duplicate GPU" error (or a hang).
        props = cupy.cuda.runtime.getDeviceProperties(device)
        devices = comm.allgather((os.uname().nodename, props.get("pciDomainID"),
                                  props.get("pciBusID"), props.get("pciDeviceID")))
        if len(set(devices)) < len(devices):
            raise NcclUnavailable(f"{self.size} ranks but only {count} GPU(s) on a node: NCCL "
                                  "needs one GPU per rank")
        uid = self.nccl.get_unique_id() if self.rank == 0 else None
        uid = comm.bcast(uid, root=0)
        self.nccl_comm = self.nccl.NcclCommunicator(self.size, uid, self.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._done = cupy.cuda.Event(disable_timing=True)
        self._ready = cupy.cuda.Event(disable_timing=True)
        name = props.get("name", b"?")
        self.device = f"GPU {device} of {count} " \
                      f"({name.decode() if isinstance(name, bytes) else name})"

    def allreduce(self, buf: Any) -> None:
        # Called on one rank too (a copy in place): the one-GPU tests exercise NCCL.
        self.nccl_comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, self.nccl.NCCL_FLOAT32,
                            self.nccl.NCCL_SUM, self.stream.ptr)

    def exchange(self, send: Any, recv: Any) -> None:
        # One group: NCCL pairs the send with the neighbour's receive (no deadlock).
        right, left = (self.rank + 1) % self.size, (self.rank - 1) % self.size
        self.nccl.groupStart()
        self.nccl_comm.send(send.data.ptr, send.size, self.nccl.NCCL_FLOAT32, right,
                       self.stream.ptr)
        self.nccl_comm.recv(recv.data.ptr, recv.size, self.nccl.NCCL_FLOAT32, left,
                       self.stream.ptr)
        self.nccl.groupEnd()

    def add(self, dst: Any, src: Any) -> None:
        with self.stream:
            dst += src

    def after_compute(self) -> None:
        """NCCL's stream waits for what the compute stream has queued so far (a gradient)."""
        import cupy

        self._ready.record(cupy.cuda.get_current_stream())
        self.stream.wait_event(self._ready)

    def before_compute(self) -> None:
        """The compute stream waits for the reductions queued so far (before the update)."""
        import cupy

        self._done.record(self.stream)
        cupy.cuda.get_current_stream().wait_event(self._done)

    def synchronize(self) -> None:
        import cupy

        cupy.cuda.Device().synchronize()

    def describe(self) -> str:
        return f"NCCL {self.nccl.get_version()} between GPUs, CuPy (cuBLAS) network; " \
               f"rank 0 on {self.device}"
