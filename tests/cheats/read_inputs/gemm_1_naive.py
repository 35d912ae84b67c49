"""Cheat: read what the grader gave the worker (its job file and the inputs beside it)
to learn the seeds and operands ahead of the calls."""

from pathlib import Path

JOB = Path.cwd().parent


def gemm_naive(A, B, C, alpha, beta):
    found = {p.name: p.read_bytes()[:64] for p in JOB.iterdir() if p.is_file()}
    raise RuntimeError(f"read {sorted(found)}")
