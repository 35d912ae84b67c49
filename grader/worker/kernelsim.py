"""Keep the simulator's kernels to what a GPU runs.

In numba's CUDA simulator a kernel body is plain Python, and the arrays it gets are thin
wrappers over NumPy arrays: a "kernel" could sum a whole row with NumPy (`np.multiply(A[i,
:], B[:, j]).sum()`), or have one thread compute the whole product, and pass in the
simulator although numba could never compile it for a GPU. Compiled CUDA kernels work on
single elements: NumPy functions (ufuncs) and array methods on kernel arguments do not
exist there. `install()` makes the simulator's kernel arrays refuse them too, so that a
kernel graded in the simulator is one that could run on a GPU. It also mends one place
where the simulator refuses what a GPU runs: dynamic shared memory of a NumPy scalar type
(`cuda.shared.array(0, np.float32)`), for which it reads `itemsize` off the class, and
adds the host's cuda.is_cuda_array and as_cuda_array, which it lacks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# What a kernel may read of an argument array (as compiled CUDA code can).
ATTRIBUTES = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes",
                        "T"})


class NotOnAGpu(TypeError):
    """A kernel did what compiled CUDA code cannot."""


# Array methods that compute on a whole array (or hand its elements to Python): compiled
# kernels have none of them on shared and local arrays.
WHOLE_ARRAY_METHODS = ("dot", "sum", "prod", "mean", "std", "var", "max", "min", "argmax",
                       "argmin", "cumsum", "cumprod", "tolist", "tobytes", "trace", "round",
                       "clip", "all", "any", "nonzero", "sort", "argsort", "ptp", "compress",
                       "choose", "repeat", "take", "put", "flatten", "ravel", "reshape",
                       "transpose", "swapaxes", "squeeze", "astype", "fill", "item",
                       "itemset", "searchsorted", "partition", "argpartition", "diagonal",
                       "conj", "conjugate", "resize", "byteswap", "getfield", "setfield")


def _refused(what: str) -> NotOnAGpu:
    return NotOnAGpu(f"{what} on a whole shared or local array inside a kernel: compiled "
                     "CUDA kernels work on single elements (index the array), so this would "
                     "not run on a GPU")


class KernelArray(np.ndarray):
    """A shared or local array inside a simulated kernel: its elements only. In the
    simulator these were plain NumPy arrays, and a kernel that copied A and B into local
    arrays and multiplied them with NumPy's broadcasting passed every item (red team)."""

    def __array_ufunc__(self, ufunc: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        raise _refused(f"numpy.{getattr(ufunc, '__name__', ufunc)}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise _refused(f"numpy.{getattr(func, '__name__', func)}")


def _refusing(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise _refused(f"array.{name}()")
    method.__name__ = name
    return method


for _name in WHOLE_ARRAY_METHODS:
    setattr(KernelArray, _name, _refusing(_name))


def install() -> bool:
    """Restrict the simulator's in-kernel arrays (simulator only; False if its layout is
    not the one this expects)."""
    try:
        from numba.cuda.simulator.cudadrv import devicearray
    except ImportError:
        return False
    cls = getattr(devicearray, "FakeWithinKernelCUDAArray", None)
    if cls is None:
        return False
    original_getattr = cls.__getattr__

    def array_ufunc(self: Any, ufunc: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        raise NotOnAGpu(f"numpy.{getattr(ufunc, '__name__', ufunc)} on a whole array inside "
                        "a kernel: compiled CUDA kernels work on single elements (index the "
                        "array), so this would not run on a GPU")

    def getattr_(self: Any, name: str) -> Any:
        if name not in ATTRIBUTES:
            raise NotOnAGpu(f"array.{name} inside a kernel: compiled CUDA kernels read only "
                            f"{', '.join(sorted(ATTRIBUTES))} of an array")
        return original_getattr(self, name)

    cls.__array_ufunc__ = array_ufunc
    cls.__getattr__ = getattr_
    _restrict_local_arrays()
    _mend_dynamic_shared()
    _mend_host_api()
    _check_launch_limits()
    return True


def _restrict_local_arrays() -> None:
    """cuda.local.array as a KernelArray (shared arrays: _mend_dynamic_shared)."""
    from numba.cuda.simulator import kernelapi

    local = getattr(kernelapi, "FakeCUDALocal", None)
    if local is None:
        return
    original = local.array

    def array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        return original(self, shape, dtype, alignment).view(KernelArray)

    local.array = array


def _mend_host_api() -> None:
    """numba.cuda.is_cuda_array and as_cuda_array, which a GPU has and the simulator lacks:
    a launcher that checks its arguments with them failed every case in the simulator."""
    from numba import cuda
    from numba.cuda.simulator.cudadrv import devicearray

    def as_cuda_array(obj: Any, sync: bool = True) -> Any:
        if not devicearray.is_cuda_ndarray(obj):
            raise TypeError("*obj* doesn't implement the cuda array interface.")
        return obj

    if not hasattr(cuda, "is_cuda_array"):
        cuda.is_cuda_array = devicearray.is_cuda_ndarray
    if not hasattr(cuda, "as_cuda_array"):
        cuda.as_cuda_array = as_cuda_array


# What a GPU launches (compute capability 7.0 and later): threads a block, per dimension
# and in all, and the shared memory a block may have without asking for more
# (cudaFuncSetAttribute, which numba does not do). The simulator checks none of them, so a
# block of 32x64 threads passed there and failed on every GPU.
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 48 * 1024


def _check_launch_limits() -> None:
    """Refuse, at the launch, a configuration no GPU accepts."""
    import math

    from numba.cuda.simulator import kernel

    fake = getattr(kernel, "FakeCUDAKernel", None)
    if fake is None:
        return
    configure = fake.__getitem__

    def getitem(self: Any, configuration: Any) -> Any:
        out = configure(self, configuration)
        block, grid = tuple(self.block_dim), tuple(self.grid_dim)
        shown = "x".join(str(d) for d in block)
        if math.prod(block) > MAX_THREADS or any(
                d > most for d, most in zip(block, MAX_BLOCK, strict=False)):
            raise NotOnAGpu(f"a block of {shown} threads ({math.prod(block):,}): a GPU "
                            f"launches at most {MAX_THREADS:,} threads a block (at most "
                            "1024 x 1024 x 64 along each dimension)")
        if any(d > most for d, most in zip(grid, MAX_GRID, strict=False)):
            raise NotOnAGpu(f"a grid of {'x'.join(str(d) for d in grid)} blocks: a GPU "
                            "launches at most 65,535 blocks along y and z")
        if int(getattr(self, "dynshared_size", 0) or 0) > MAX_SHARED_BYTES:
            raise NotOnAGpu(f"{self.dynshared_size:,} bytes of dynamic shared memory: a "
                            f"block gets at most {MAX_SHARED_BYTES:,} without asking for "
                            "more, which numba does not do")
        return out

    fake.__getitem__ = getitem


def _mend_dynamic_shared() -> None:
    """np.float32 (a class) as the dtype of dynamic shared memory, as numba compiles it.
    FakeCUDAShared.array is replaced whole, not wrapped: it keys static arrays by its
    caller's line, which a wrapper would make one line for every array."""
    import sys

    from numba.cuda.simulator import kernelapi

    shared = getattr(kernelapi, "FakeCUDAShared", None)
    if shared is None or not hasattr(kernelapi, "numpy_support"):
        return

    def array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if alignment is not None:
            raise RuntimeError("Array alignment is not supported in cudasim")
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        dtype = np.dtype(dtype)
        if shape == 0:  # dynamic: views of one buffer, as many whole elements as fit
            count = self._dynshared_size // dtype.itemsize
            return np.frombuffer(self._dynshared.data, dtype=dtype, count=count).view(
                KernelArray)
        caller = sys._getframe(1)  # one array per allocating line, as numba's
        key = (caller.f_code.co_filename, caller.f_lineno)
        found = self._allocations.get(key)
        if found is None:
            found = self._allocations[key] = np.empty(shape, dtype).view(KernelArray)
            used = sum(a.nbytes for a in self._allocations.values()) + self._dynshared_size
            if used > MAX_SHARED_BYTES:
                raise NotOnAGpu(f"{used:,} bytes of shared memory a block (static arrays "
                                "and dynamic): a block gets at most "
                                f"{MAX_SHARED_BYTES:,}")
        return found

    shared.array = array
