"""GEMM benchmark: every kernel of an implementation against cuBLAS, in one run.

    python -m nnkit bench-gemm [--impl solution|starter|FOLDER] [--shapes 4096x4096x4096,...]
                               [--kernels naive,...,cuda-c] [--plot FILE.png] [--sweep-v4]
                               [--json FILE]

For each shape, each kernel is first checked against a float64 reference with the float32
error bound of nnkit.gemm_reference, and only then timed (fastest of --repeats calls, each
ending with a device synchronisation). Figures: GFLOP/s and the share of cuBLAS's GFLOP/s
(float32, TF32 off) measured on the same operands in the same run; then each compiled
kernel's registers, shared memory and local memory (spills). --plot draws every version
and cuBLAS over square sizes; --sweep-v4 times version 4 with other tile sizes
(nnkit/bench_gemm_sweep.py). Results also go to --json if given. On a GPU with CuPy the
kit's CUDA C kernel, version 5 (nnkit/gemm_cuda.py), runs beside the versions of --impl as
`cuda-c` (`cuda-c:BMxBNxBK` picks its tiles). `VERSION+thin` (hierarchical+thin,
cuda-c+thin, ...) is that version behind nnkit.thin_dispatch, as `train --gemm` runs it:
products with a dimension of at most 16 go to the kernels made for them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from nnkit import bench_gemm_cuda
from nnkit.backend import select
from nnkit.bench_gemm_check import ALPHA, BETA, check_and_time, problem
from nnkit.bench_gemm_plot import PLOT_SIZES, parse_sizes, plot_progression
from nnkit.bench_gemm_sweep import DEFAULT_TILES, SWEEP_SHAPES, format_sweep, parse_tiles, sweep
from nnkit.gemm import KERNELS, Launcher, cublas_gemm
from nnkit.kernel_resources import format_resources, resources
from nnkit.submission import load_function, load_module, resolve
from nnkit.timing import gemm_gflops, spin_up

GPU_SHAPES = "4096x4096x4096,1024x3200x784,800x1000x784,800x10x1000,10x3200x1024"
SIMULATOR_SHAPES = "64x64x64"


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


def run(impl: str, shapes: list[tuple[int, int, int]], kernels: list[str],
        repeats: int) -> list[dict]:
    backend = select()
    folder = resolve(impl)
    launchers = {k: load_function(folder, *KERNELS[k]) for k in kernels if k in KERNELS}
    launchers.update(bench_gemm_cuda.launchers(kernels, backend.on_gpu))
    launchers.update(thin_launchers(kernels, folder, backend.on_gpu))
    if backend.on_gpu:
        launchers = {"cublas": cublas_gemm, **launchers}
    rows = []
    spin_up()
    for M, N, K in shapes:
        A, B, C0, expected, bound = problem(M, N, K)
        for name, launch in launchers.items():
            status, seconds = check_and_time(launch, A, B, C0, expected, bound, repeats)
            rows.append({"shape": f"{M}x{N}x{K}", "kernel": name, "status": status,
                         "seconds": seconds,
                         "gflops": gemm_gflops(M, N, K, seconds) if seconds else None})
            print(f"  {M}x{N}x{K} {name}: {status}", file=sys.stderr)
    add_shares(rows)
    return rows


def thin_choices() -> list[str]:
    from nnkit.training import GEMM_CHOICES, THIN_SUFFIX

    return [g for g in GEMM_CHOICES if g.endswith(THIN_SUFFIX)]


def thin_launchers(kernels: list[str], folder: Path, on_gpu: bool) -> dict[str, Launcher]:
    """The VERSION+thin entries of `kernels` (cuda-c+thin on a GPU only, said otherwise)."""
    from nnkit.training import make_launcher

    found = {}
    for kernel in (k for k in kernels if k in thin_choices()):
        if bench_gemm_cuda.is_cuda_c(kernel.partition("+")[0]) and not on_gpu:
            print(f"{kernel}: skipped, it needs a GPU", file=sys.stderr)
            continue
        found[kernel] = make_launcher(kernel, folder)
    return found


def add_shares(rows: list[dict]) -> None:
    """Each row's share of the GFLOP/s of the cuBLAS row of the same shape (None without)."""
    for row in rows:
        base = next((r for r in rows if r["shape"] == row["shape"] and r["kernel"] == "cublas"),
                    None)
        ok = base and base["gflops"] and row["gflops"]
        row["share_of_cublas"] = row["gflops"] / base["gflops"] if ok else None


def format_table(rows: list[dict], backend: str) -> str:
    lines = [f"GEMM benchmark on {backend}; alpha = {ALPHA:g}, beta = {BETA:g}, float32",
             f"{'M x N x K':>16}  {'kernel':<17} {'GFLOP/s':>9}  {'of cuBLAS':>9}  status"]
    for r in rows:
        gflops = f"{r['gflops']:9.0f}" if r["gflops"] else f"{'-':>9}"
        share = f"{r['share_of_cublas']:9.1%}" if r["share_of_cublas"] else f"{'-':>9}"
        lines.append(f"{r['shape']:>16}  {r['kernel']:<17} {gflops}  {share}  {r['status']}")
    return "\n".join(lines)


def no_tf32() -> str:
    """Keep cuBLAS in plain float32 (TF32 would run it on tensor cores at lower precision,
    which is no fair yardstick for float32 kernels). Call before CuPy makes its handle."""
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # the CUDA libraries' own switch
    os.environ["CUPY_TF32"] = "0"
    return "TF32 off (NVIDIA_TF32_OVERRIDE=0, CUPY_TF32=0)"


def kernel_rows(impl: str, kernels: list[str]) -> list[dict]:
    """Registers, shared and local memory of every kernel the benchmark compiled."""
    folder = resolve(impl)
    rows = []
    for kernel in (k for k in kernels if k in KERNELS):
        for row in resources(load_module(folder, KERNELS[kernel][0])):
            rows.append({"version": kernel, **row})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnkit bench-gemm",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="solution", help="solution, starter or a folder")
    parser.add_argument("--shapes", default=None, help="comma-separated MxNxK list")
    parser.add_argument("--kernels", default=",".join([*KERNELS, bench_gemm_cuda.NAME]),
                        help="versions of --impl, and the kit's CUDA C kernel (cuda-c)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw every version and cuBLAS over square sizes into this PNG")
    parser.add_argument("--plot-sizes", default=None,
                        help=f"n for the plot's n x n x n products (GPU default {PLOT_SIZES})")
    parser.add_argument("--sweep-v4", action="store_true",
                        help="also time version 4 with several tile sizes (--sweep-tiles)")
    parser.add_argument("--sweep-tiles", default=DEFAULT_TILES,
                        help="BMxBNxBK/WMxWN/TMxTN,... (default: a list of 11)")
    parser.add_argument("--sweep-shapes", default=None,
                        help=f"shapes of the sweep (GPU default {SWEEP_SHAPES})")
    args = parser.parse_args(argv)
    tf32 = no_tf32()
    backend = select()
    try:
        shapes = parse_shapes(args.shapes or (GPU_SHAPES if backend.on_gpu else SIMULATOR_SHAPES))
        plot_sizes = parse_sizes(args.plot_sizes or (PLOT_SIZES if backend.on_gpu else "16,32"))
        sweep_shapes = parse_shapes(args.sweep_shapes or (SWEEP_SHAPES if backend.on_gpu
                                                          else SIMULATOR_SHAPES))
        tiles = parse_tiles(args.sweep_tiles)
    except ValueError as err:
        parser.error(str(err))
    kernels = [k for k in args.kernels.split(",") if k]
    if any(k not in KERNELS and not bench_gemm_cuda.is_cuda_c(k) and k not in thin_choices()
           for k in kernels):
        parser.error(f"--kernels: choose from {', '.join(KERNELS)}, "
                     f"{bench_gemm_cuda.choices()}, {', '.join(thin_choices())}")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if not backend.on_gpu:
        print("No GPU: kernels run in the CUDA simulator; times say nothing about a GPU and "
              "there is no cuBLAS to compare with.", file=sys.stderr)
    rows = run(args.impl, shapes, kernels, args.repeats)
    described = f"{backend.describe()}; {tf32}"
    print(format_table(rows, described))
    compiled = kernel_rows(args.impl, kernels) + bench_gemm_cuda.resources(kernels,
                                                                             backend.on_gpu)
    print()
    print(format_resources(compiled) if compiled else
          "Registers, shared and local memory: reported for compiled kernels only (GPU).")
    report = {"backend": described, "rows": rows, "resources": compiled}
    if args.plot:
        plot_rows = run(args.impl, plot_sizes, kernels, args.repeats)
        path = plot_progression(plot_rows, args.plot, f"GEMM versions against cuBLAS, "
                                f"{backend.describe()}, float32, TF32 off")
        print(f"\nplot: {path}")
        report["plot_rows"] = plot_rows
    if args.sweep_v4:
        swept = sweep(resolve(args.impl), tiles, sweep_shapes, args.repeats)
        print()
        print(format_sweep(swept, sweep_shapes))
        report["sweep_v4"] = swept
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0
