"""GEMM benchmark: every kernel of an implementation against cuBLAS, in one run.

    python -m nnkit bench-gemm [--impl solution|starter|FOLDER] [--shapes 4096x4096x4096,...]

For each shape, each kernel is first checked against a float64 reference with the float32
error bound of nnkit.gemm_reference, and only then timed (fastest of --repeats calls, each
ending with a device synchronisation). Figures: GFLOP/s and the share of cuBLAS's GFLOP/s
measured on the same operands in the same run. Results also go to --json if given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from nnkit.backend import copy_into, select, to_device, to_host
from nnkit.gemm import KERNELS, cublas_gemm, gemm
from nnkit.gemm_reference import error_bound, random_operands, reference
from nnkit.submission import load_function, resolve
from nnkit.timing import best, gemm_gflops, spin_up, time_calls

GPU_SHAPES = "4096x4096x4096,800x1000x784,800x10x1000,1024x3200x784,10x3200x1024"
SIMULATOR_SHAPES = "64x64x64"
ALPHA, BETA = 2.0, 5.0


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for part in text.split(","):
        try:
            M, N, K = (int(x) for x in part.lower().split("x"))
        except ValueError:
            raise ValueError(f"shape {part!r}: expected MxNxK, like 800x1000x784") from None
        if min(M, N, K) < 1:
            raise ValueError(f"shape {part!r}: every dimension must be >= 1")
        shapes.append((M, N, K))
    return shapes


def check_and_time(launch, A, B, C0, expected, bound, repeats: int) -> tuple[str, float | None]:
    """('ok', best seconds), or (what went wrong, None). C0 is never modified."""
    C = to_device(to_host(C0))
    try:
        gemm(launch, A, B, C, ALPHA, BETA)
        got = to_host(C).astype(np.float64)
    except Exception as err:  # noqa: BLE001 - report it and go on with the other kernels
        return f"{type(err).__name__}: {err}"[:120], None
    bad = int((~(np.abs(got - expected) <= bound)).sum())
    if bad:
        return f"WRONG: {bad} elements outside the float32 bound", None
    timings = time_calls(lambda: gemm(launch, A, B, C, ALPHA, BETA), repeats=repeats,
                         before_each=lambda: copy_into(C, C0))
    if timings.escaped_events():
        return "work ran outside the timed stream", None
    return "ok", best(timings.counted)


def run(impl: str, shapes: list[tuple[int, int, int]], kernels: list[str],
        repeats: int) -> list[dict]:
    backend = select()
    folder = resolve(impl)
    launchers = {k: load_function(folder, *KERNELS[k]) for k in kernels}
    if backend.on_gpu:
        launchers = {"cublas": cublas_gemm, **launchers}
    rows = []
    spin_up()
    for M, N, K in shapes:
        A_h, B_h, C_h = random_operands(M, N, K, seed=M * 7 + N * 3 + K)
        expected = reference(A_h, B_h, C_h, ALPHA, BETA)
        bound = error_bound(A_h, B_h, C_h, ALPHA, BETA)
        A, B, C0 = (to_device(x) for x in (A_h, B_h, C_h))
        for name, launch in launchers.items():
            status, seconds = check_and_time(launch, A, B, C0, expected, bound, repeats)
            rows.append({"shape": f"{M}x{N}x{K}", "kernel": name, "status": status,
                         "seconds": seconds,
                         "gflops": gemm_gflops(M, N, K, seconds) if seconds else None})
            print(f"  {M}x{N}x{K} {name}: {status}", file=sys.stderr)
    for row in rows:
        base = next((r for r in rows if r["shape"] == row["shape"] and r["kernel"] == "cublas"),
                    None)
        ok = base and base["gflops"] and row["gflops"]
        row["share_of_cublas"] = row["gflops"] / base["gflops"] if ok else None
    return rows


def format_table(rows: list[dict], backend: str) -> str:
    lines = [f"GEMM benchmark on {backend}; alpha = {ALPHA:g}, beta = {BETA:g}, float32",
             f"{'M x N x K':>16}  {'kernel':<9} {'GFLOP/s':>9}  {'of cuBLAS':>9}  status"]
    for r in rows:
        gflops = f"{r['gflops']:9.0f}" if r["gflops"] else f"{'-':>9}"
        share = f"{r['share_of_cublas']:9.1%}" if r["share_of_cublas"] else f"{'-':>9}"
        lines.append(f"{r['shape']:>16}  {r['kernel']:<9} {gflops}  {share}  {r['status']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnkit bench-gemm",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="solution", help="solution, starter or a folder")
    parser.add_argument("--shapes", default=None, help="comma-separated MxNxK list")
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    backend = select()
    try:
        shapes = parse_shapes(args.shapes or (GPU_SHAPES if backend.on_gpu else SIMULATOR_SHAPES))
    except ValueError as err:
        parser.error(str(err))
    kernels = [k for k in args.kernels.split(",") if k]
    if any(k not in KERNELS for k in kernels):
        parser.error(f"--kernels: choose from {', '.join(KERNELS)}")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if not backend.on_gpu:
        print("No GPU: kernels run in the CUDA simulator; times say nothing about a GPU and "
              "there is no cuBLAS to compare with.", file=sys.stderr)
    rows = run(args.impl, shapes, kernels, args.repeats)
    print(format_table(rows, backend.describe()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"backend": backend.describe(), "rows": rows}, indent=2))
    return 0
