"""nnkit.fastlaunch: the remembered-plan launch gives the results of numba's own launch,
and leaves what it does not handle to numba."""

import numpy as np
import pytest

from nnkit import fastlaunch


class _FakeDeviceArray:
    """Just the CUDA array interface, as another library's array would have it."""

    def __init__(self, shape, typestr, strides=None, ptr=4096):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "strides": strides, "data": (ptr, False),
                                         "version": 3}


def test_array_fields_follow_numbas_layout():
    c_order = _FakeDeviceArray((3, 5), "<f4")
    assert fastlaunch.array_fields(c_order) == [0, 0, 15, 4, 4096, 3, 5, 20, 4]
    transposed = _FakeDeviceArray((5, 3), "<f4", strides=(4, 20), ptr=8192)
    assert fastlaunch.array_fields(transposed) == [0, 0, 15, 4, 8192, 5, 3, 4, 20]
    empty = _FakeDeviceArray((0, 7), "<f8")
    assert fastlaunch.array_fields(empty)[2:4] == [0, 8]


def test_argument_keys_leave_unknown_values_to_numba():
    assert fastlaunch.argument_key(3) == (int,)
    assert fastlaunch.argument_key(2**70) is None  # numba would not type it as int64
    assert fastlaunch.argument_key(0.5) == (float,)
    assert fastlaunch.argument_key(True) == (bool,)  # not int: numba types it boolean
    assert fastlaunch.argument_key(np.float32(0.5)) == (np.float32,)
    assert fastlaunch.argument_key(np.zeros(3, np.float32)) is None  # host array: copied
    assert fastlaunch.argument_key(np.array(1.0)) is None  # 0-d host array
    assert fastlaunch.argument_key((1, 2)) is None
    assert fastlaunch.argument_key(_FakeDeviceArray((2,), "<f4")) is None  # unknown type


@pytest.mark.gpu
def test_fast_launches_equal_numbas_and_are_taken():
    from nnkit.backend import cuda, select

    assert select().on_gpu
    import cupy

    @cuda.jit
    def axpby(out, X, Y, alpha, beta, rows):
        j, i = cuda.grid(2)
        if i < rows and j < out.shape[1]:
            out[i, j] = alpha * X[i, j] + beta * Y[i, j]

    rng = np.random.default_rng(0)
    X = rng.standard_normal((37, 53)).astype(np.float32)
    Y = rng.standard_normal((53, 37)).astype(np.float32)
    dX, dY = cupy.asarray(X), cupy.asarray(Y)
    cases = [  # each argument kind: C and F (transposed) CuPy arrays, numba arrays, scalars
        (dX, dY.T, 2.0, -1.0, 37, X * 2.0 - Y.T),
        (dX, dY.T, np.float32(0.5), np.float32(3.0), 37, X * 0.5 + 3.0 * Y.T),
        (cuda.to_device(X), cuda.to_device(np.ascontiguousarray(Y.T)), 1.0, 1.0, 20, X + Y.T),
    ]
    before = dict(fastlaunch.stats)
    for X_, Y_, alpha, beta, rows, want in cases:
        for _ in range(3):  # the first launch of a kind is numba's, the next ones fast
            out = cupy.zeros((37, 53), np.float32)
            axpby[(2, 10), (32, 4)](out, X_, Y_, alpha, beta, rows)
            got = cupy.asnumpy(out)
            np.testing.assert_allclose(got[:rows], want[:rows], rtol=1e-6, atol=1e-6)
            assert not got[rows:].any()
    assert fastlaunch.stats["fast"] - before["fast"] == 2 * len(cases)
    with pytest.raises(Exception):  # noqa: B017 - numba's own error for a wrong argument list
        axpby[(2, 10), (32, 4)](out, dX)
