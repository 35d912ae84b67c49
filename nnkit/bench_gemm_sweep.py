"""`bench-gemm --sweep-v4`: version 4 compiled with several tile sizes, timed against cuBLAS.

Each configuration is a fresh copy of the module with its constants substituted
(nnkit/gemm_tiles.py), checked against the float64 reference and timed like every other
kernel of the benchmark, on the same operands as cuBLAS in the same run. The table gives
what decides the speed besides the tiles themselves: registers per thread, local memory
(spills) and the warps an SM can hold.

Tiles are written BMxBNxBK/WMxWN/TMxTN, for example 128x128x8/64x32/8x8.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from nnkit.gemm import cublas_gemm
from nnkit.gemm_tiles import TILES, TileError, tile_sizes, variant_module
from nnkit.kernel_resources import resident_warps, resources
from nnkit.timing import gemm_gflops

# Block tiles of 64 to 256, BK of 8 or 16, warp tiles of 32 thread tiles, thread tiles
# of 4x4 to 8x8; each fits 48 KiB of shared memory. The first is the module's default.
DEFAULT_TILES = ",".join([
    "64x64x8/32x16/4x4",  # the solution's: best geometric mean on an H100 (2026-11-24)
    "128x128x8/64x32/8x8",
    "128x128x16/64x32/8x8",
    "128x128x8/32x64/8x8",
    "128x64x8/64x32/8x8",
    "64x128x8/32x64/8x8",
    "128x64x16/64x32/8x8",
    "256x128x8/64x32/8x8",
    "128x128x8/64x16/8x4",
    "128x128x8/32x32/4x8",
    "64x64x16/32x32/4x8",
])
SWEEP_SHAPES = "4096x4096x4096,1024x3200x784,800x1000x784"


def parse_tiles(text: str) -> list[dict[str, int]]:
    """'BMxBNxBK/WMxWN/TMxTN,...' -> a dict of tile sizes per configuration."""
    configs = []
    for part in text.split(","):
        try:
            values = [int(x) for group in part.strip().split("/") for x in group.split("x")]
        except ValueError:
            values = []
        if len(values) != len(TILES):
            raise ValueError(f"tiles {part!r}: expected BMxBNxBK/WMxWNxTMxTN, "
                             "like 128x128x8/64x32/8x8")
        configs.append(dict(zip(TILES, values, strict=True)))
    return configs


def label(tiles: dict[str, int]) -> str:
    t = tiles
    return f"{t['BM']}x{t['BN']}x{t['BK']}/{t['WM']}x{t['WN']}/{t['TM']}x{t['TN']}"


def sweep(folder: Path, configs: list[dict[str, int]], shapes: list[tuple[int, int, int]],
          repeats: int) -> list[dict]:
    """One row per configuration: its figures per shape, its resources, or why it failed."""
    from nnkit.backend import select
    from nnkit.bench_gemm_check import check_and_time, problem
    from nnkit.timing import spin_up

    on_gpu = select().on_gpu
    rows: list[dict] = []
    modules = {}
    for tiles in configs:
        row = {"tiles": label(tiles), "status": "ok", "results": {}}
        try:
            modules[row["tiles"]] = variant_module(folder, **tiles)
        except TileError as err:
            row["status"] = f"refused: {err}"
        rows.append(row)
    spin_up()
    for M, N, K in shapes:
        shape = f"{M}x{N}x{K}"
        A, B, C0, expected, bound = problem(M, N, K)
        base = None
        if on_gpu:
            status, seconds = check_and_time(cublas_gemm, A, B, C0, expected, bound, repeats)
            base = gemm_gflops(M, N, K, seconds) if seconds else None
        for row in rows:
            module = modules.get(row["tiles"])
            if module is None or row["status"] != "ok":
                continue
            status, seconds = check_and_time(module.gemm_hierarchical, A, B, C0, expected,
                                             bound, repeats)
            if status != "ok":
                row["status"] = f"{shape}: {status}"
                continue
            gflops = gemm_gflops(M, N, K, seconds)
            row["results"][shape] = {"gflops": gflops, "cublas_gflops": base,
                                     "share_of_cublas": gflops / base if base else None}
            print(f"  {shape} {row['tiles']}: {gflops:.0f} GFLOP/s", file=sys.stderr)
    for row in rows:
        module = modules.get(row["tiles"])
        if module is not None:
            plain = [r for r in resources(module) if r["layouts"] == "C,C,C"]
            if plain:
                r = plain[0]
                row.update(registers=r["registers"], shared_bytes=r["shared_bytes"],
                           local_bytes=r["local_bytes"], threads=module.THREADS,
                           warps_per_sm=resident_warps(r["registers"], r["shared_bytes"],
                                                       module.THREADS))
            row["tile_sizes"] = tile_sizes(module)
        shares = [v["share_of_cublas"] for v in row["results"].values() if v["share_of_cublas"]]
        row["geomean_share"] = (math.exp(sum(map(math.log, shares)) / len(shares))
                                if shares and len(shares) == len(shapes) else None)
    return rows


def format_sweep(rows: list[dict], shapes: list[tuple[int, int, int]]) -> str:
    names = [f"{M}x{N}x{K}" for M, N, K in shapes]
    head = (f"{'tiles BMxBNxBK/WMxWN/TMxTN':<27} {'thr':>4} {'regs':>4} {'local':>5} "
            f"{'warps':>5}  " + "  ".join(f"{n:>20}" for n in names) + f"  {'geomean':>7}")
    lines = ["Version 4 tile sweep: GFLOP/s (share of cuBLAS), same operands, same run", head]
    for r in rows:
        cells = []
        for n in names:
            v = r["results"].get(n)
            if v is None:
                cells.append(f"{'-':>20}")
            elif v["share_of_cublas"]:
                cells.append(f"{v['gflops']:>11.0f} ({v['share_of_cublas']:6.1%})")
            else:
                cells.append(f"{v['gflops']:>20.0f}")
        geo = f"{r['geomean_share']:7.1%}" if r.get("geomean_share") else f"{'-':>7}"
        line = (f"{r['tiles']:<27} {r.get('threads', '-'):>4} {r.get('registers', '-'):>4} "
                f"{r.get('local_bytes', '-'):>5} {r.get('warps_per_sm', '-'):>5}  "
                + "  ".join(cells) + f"  {geo}")
        if r["status"] != "ok":
            line += f"  {r['status'][:100]}"
        lines.append(line)
    ranked = [r for r in rows if r.get("geomean_share")]
    if ranked:
        best = max(ranked, key=lambda r: r["geomean_share"])
        lines.append(f"best (geometric mean of the shares): {best['tiles']}; set these "
                     f"constants at the top of solution/gemm_4_hierarchical.py")
    return "\n".join(lines)
