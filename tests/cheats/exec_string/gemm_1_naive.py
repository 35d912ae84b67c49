"""Cheat: code assembled from strings and executed, so that nothing in the source names
what it does."""

NAME = "".join(["g", "c"])


def gemm_naive(A, B, C, alpha, beta):
    scope = {}
    exec(f"import {NAME}; found = len({NAME}.get_objects())", scope)
    raise RuntimeError(f"found {scope['found']}")
