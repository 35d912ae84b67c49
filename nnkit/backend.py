"""Where kernels run: on a CUDA GPU, or in numba's CUDA simulator on the CPU.

numba reads NUMBA_ENABLE_CUDASIM once, when numba.cuda is first imported, so the choice
has to be made before that import. Every module that launches kernels therefore imports
`cuda` from here (``from nnkit.backend import cuda``) instead of from numba directly.

The choice follows NNKIT_DEVICE: ``auto`` (default) takes the GPU when the CUDA driver
reports one and CuPy is installed, and the simulator otherwise; ``gpu`` insists on the GPU;
``sim`` insists on the simulator.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from dataclasses import dataclass
from typing import Any

ENV_CHOICE = "NNKIT_DEVICE"
GPU = "gpu"
SIMULATOR = "simulator"


class BackendError(RuntimeError):
    """The requested device cannot be used."""


@dataclass(frozen=True)
class Backend:
    mode: str  # GPU or SIMULATOR
    detail: str  # the GPU's name, or why the simulator was chosen

    @property
    def on_gpu(self) -> bool:
        return self.mode == GPU

    def describe(self) -> str:
        if self.on_gpu:
            return f"GPU ({self.detail})"
        return f"CUDA simulator on the CPU ({self.detail})"


def _driver() -> tuple[Any, int, str]:
    """(the CUDA driver library or None, its GPU count, why there are none)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, 0, "no CUDA driver on this machine"
    if lib.cuInit(0) != 0:
        return lib, 0, "the CUDA driver reports no usable GPU"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return lib, 0, "the CUDA driver reports no GPU"
    return lib, count.value, ""


def device_count() -> tuple[int, str]:
    """The GPUs the CUDA driver shows this process (it honours CUDA_VISIBLE_DEVICES), asked
    without importing numba or CuPy; with the reason when there are none."""
    _, count, why = _driver()
    return count, why


def probe_gpu() -> tuple[bool, str]:
    """Ask the CUDA driver for a device without importing numba or CuPy.

    Returns (usable, GPU name or the reason it is not usable).
    """
    lib, count, why = _driver()
    if not count:
        return False, why
    device = ctypes.c_int(0)
    name = ctypes.create_string_buffer(256)
    lib.cuDeviceGet(ctypes.byref(device), 0)
    lib.cuDeviceGetName(name, len(name), device)
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False, "a GPU is present but CuPy is not installed (pip install -e '.[gpu]')"
    return True, name.value.decode(errors="replace") or "CUDA GPU"


_selected: Backend | None = None


def _numba_cuda_mode() -> str | None:
    """The mode numba.cuda was imported in, or None if it is not imported yet."""
    if "numba.cuda" not in sys.modules:
        return None
    from numba import config

    return SIMULATOR if config.ENABLE_CUDASIM else GPU


def select() -> Backend:
    """Decide the backend once per process and prepare numba for it."""
    global _selected
    if _selected is not None:
        return _selected
    choice = os.environ.get(ENV_CHOICE, "auto").strip().lower() or "auto"
    if choice not in ("auto", "gpu", "sim"):
        raise BackendError(f"{ENV_CHOICE}={choice!r}: expected auto, gpu or sim")
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and choice == "auto":
        choice = "sim"
        reason = "NUMBA_ENABLE_CUDASIM=1 is set"
    else:
        reason = f"{ENV_CHOICE}=sim"
    if choice == "sim":
        backend = Backend(SIMULATOR, reason)
    else:
        usable, detail = probe_gpu()
        if usable:
            backend = Backend(GPU, detail)
        elif choice == "gpu":
            raise BackendError(f"{ENV_CHOICE}=gpu, but {detail}")
        else:
            backend = Backend(SIMULATOR, detail)
    already = _numba_cuda_mode()
    if already is not None and already != backend.mode:
        raise BackendError(
            f"numba.cuda was imported in {already} mode before nnkit chose {backend.mode}: "
            "import kernels' `cuda` from nnkit.backend, not from numba"
        )
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if backend.mode == SIMULATOR else "0"
    # CuPy arrays name the stream they were made on (the legacy default stream), and numba
    # by default synchronizes that stream for every such argument of every launch: each
    # launch would wait for the GPU to finish all earlier work, so host and device never
    # overlap. The kit's kernels, CuPy and cuBLAS all run on that one stream, in order,
    # which makes the wait useless. (A user's explicit setting wins.)
    os.environ.setdefault("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", "0")
    # numba warns about every launch of fewer than 128 blocks; the grading shapes and the
    # network's small layers make that noise, not advice.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    _selected = backend
    if backend.on_gpu:
        from nnkit import fastlaunch

        fastlaunch.install()  # numba's launch costs more than the network's small kernels
    return backend


def preload_numba_math() -> None:
    """Load numba-cuda's array-math module now, with SciPy hidden (GPU only). At load it
    imports SciPy only to learn whether np.convolve and np.correlate may call BLAS's dot,
    which device code never can: ~0.9 s in the first kernel compile of every process, so
    of every grading job. For processes that compile kernels (the grader's workers)."""
    if not select().on_gpu or "numba.cuda.np.arraymath" in sys.modules \
            or "scipy" in sys.modules:
        return
    sys.modules["scipy"] = None  # type: ignore[assignment]  # `import scipy` fails at once
    try:
        import numba.cuda.np.arraymath  # noqa: F401
    except ImportError:
        pass  # another numba-cuda layout: it loads the module itself, at its own cost
    finally:
        if "scipy" in sys.modules and sys.modules["scipy"] is None:
            del sys.modules["scipy"]


def xp() -> Any:
    """The array module that matches the backend: cupy on the GPU, numpy otherwise."""
    if select().on_gpu:
        import cupy

        return cupy
    import numpy

    return numpy


# On the GPU, device arrays are CuPy arrays; in the simulator, numba's simulated device
# arrays. Both slice into views, transpose with .T and reshape without copying.


def to_device(array: Any) -> Any:
    """Copy a host array to the device."""
    import numpy as np

    if select().on_gpu:
        import cupy

        return cupy.asarray(np.ascontiguousarray(array))
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(array))


def to_host(array: Any) -> Any:
    """A NumPy copy of a device (or host) array."""
    import numpy as np

    if hasattr(array, "copy_to_host"):  # numba device array, real or simulated
        return array.copy_to_host()
    if hasattr(array, "get"):  # a CuPy array
        return array.get()
    return np.array(array, copy=True)


def empty(shape: tuple[int, ...] | int, dtype: Any = "float32") -> Any:
    """An uninitialised device array."""
    if select().on_gpu:
        import cupy

        return cupy.empty(shape, dtype=dtype)
    from numba import cuda

    return cuda.device_array(shape, dtype=dtype)


def zeros(shape: tuple[int, ...] | int, dtype: Any = "float32") -> Any:
    import numpy as np

    return to_device(np.zeros(shape, dtype=dtype))


def copy(array: Any) -> Any:
    """A new device array holding the same values (copied on the device)."""
    out = empty(array.shape, array.dtype)
    copy_into(out, array)
    return out


_copy_observer: Any = None


def set_copy_observer(observer: Any) -> None:
    """Have observer(dst, src) called before every copy_into (the grader records what a
    graded call does to device memory; grader/worker/launches.py)."""
    global _copy_observer
    _copy_observer = observer


def copy_into(dst: Any, src: Any) -> None:
    """Overwrite device array dst with the contents of device array src (same shape)."""
    if _copy_observer is not None:
        _copy_observer(dst, src)
    if hasattr(dst, "copy_to_device"):  # numba device array, real or simulated
        dst.copy_to_device(src)
    else:
        dst[...] = src


def as_cupy(array: Any) -> Any:
    """A CuPy view of a device array (GPU only), for CuPy and cuBLAS calls."""
    import cupy

    return cupy.asarray(array)


def synchronize() -> None:
    """Wait for all work queued on the device (a no-op in the simulator)."""
    if select().on_gpu:
        import cupy

        cupy.cuda.Device().synchronize()


# Keywords of numba's GPU cuda.jit that its simulator's jit does not take (numba-cuda
# 0.30): they tune the generated code only, so in the simulator they are dropped rather
# than failing the import of a module written for the GPU (`@cuda.jit(lineinfo=True)`).
GPU_ONLY_JIT_KEYWORDS = ("lineinfo", "forceinline", "launch_bounds", "lto", "max_registers")


def _simulator_jit(jit: Any) -> Any:
    @functools.wraps(jit)
    def tolerant(*args: Any, **keywords: Any) -> Any:
        for key in GPU_ONLY_JIT_KEYWORDS:
            keywords.pop(key, None)
        return jit(*args, **keywords)

    tolerant.drops_gpu_keywords = True
    return tolerant


def __getattr__(name: str) -> Any:
    # `from nnkit.backend import cuda` selects the backend, then hands out numba.cuda.
    if name == "cuda":
        backend = select()
        from numba import cuda

        if not backend.on_gpu and not getattr(cuda.jit, "drops_gpu_keywords", False):
            cuda.jit = _simulator_jit(cuda.jit)
        return cuda
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
