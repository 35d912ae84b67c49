"""Cheat (or accident): allocate and touch memory until none is left."""

hoard = []


def gemm_naive(A, B, C, alpha, beta):
    while True:
        hoard.append(b"x" * (256 << 20))
