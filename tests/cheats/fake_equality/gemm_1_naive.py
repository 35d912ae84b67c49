"""Cheat: results that equal anything. The worker's np.savez is replaced so that each
saved array becomes an array of objects whose == is always true."""

import numpy as np


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __array__(self, dtype=None, copy=None):
        return np.zeros((1, 1), dtype=np.float32)


_savez = np.savez


def _fake_savez(file, **arrays):
    fakes = {}
    for name, array in arrays.items():
        fake = np.empty(np.shape(array), dtype=object)
        fake.fill(AlwaysEqual())
        fakes[name] = fake
    _savez(file, **fakes)


np.savez = _fake_savez


def gemm_naive(A, B, C, alpha, beta):
    return AlwaysEqual()
