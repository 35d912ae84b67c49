"""bench-gemm's pieces: tile lists, compiled-kernel resources, and one run in the simulator
with the plot and the version-4 sweep (figures there say nothing about a GPU)."""

import json
import re
from types import SimpleNamespace

import pytest

from nnkit.bench_gemm import main
from nnkit.bench_gemm_sweep import DEFAULT_TILES, label, parse_tiles
from nnkit.gemm_tiles import problems, tile_sizes
from nnkit.kernel_resources import format_resources, resident_warps, resources
from nnkit.submission import NAMED, load_module


def test_default_sweep_tiles_all_fit_the_design():
    configs = parse_tiles(DEFAULT_TILES)
    module = load_module(NAMED["solution"], "gemm_4_hierarchical")
    assert configs[0] == tile_sizes(module), "the sweep's first entry is the module's default"
    assert len(configs) >= 8
    assert {label(c) for c in configs} == set(DEFAULT_TILES.split(","))
    assert all(problems(**c) == [] for c in configs), [problems(**c) for c in configs]


@pytest.mark.parametrize("text", ["128x128x8/64x32", "128x128x8/64x32/8xq", ""])
def test_malformed_tiles_are_refused(text):
    with pytest.raises(ValueError, match="BMxBNxBK"):
        parse_tiles(text)


def test_resources_read_every_compiled_signature():
    def kernel(regs, local):
        return SimpleNamespace(regs_per_thread=regs, shared_mem_per_block=9216,
                               local_mem_per_thread=local)

    class Array:  # what numba's array types tell: their layout (hashable, as types are)
        def __init__(self, layout):
            self.layout = layout

    array, view = Array("C"), Array("A")
    dispatcher = SimpleNamespace(get_regs_per_thread=None, overloads={
        (array, array, array, "float32"): kernel(128, 0),
        (view, array, array, "float32"): kernel(168, 64)})
    module = SimpleNamespace(gemm_kernel=dispatcher, BM=128, helper=len)
    rows = resources(module)
    assert [(r["layouts"], r["registers"], r["local_bytes"]) for r in rows] == [
        ("C,C,C", 128, 0), ("A,C,C", 168, 64)]
    text = format_resources(rows)
    assert "yes: local memory" in text.splitlines()[2] and text.splitlines()[1].endswith("no")


def test_resident_warps_follow_registers_and_shared_memory():
    assert resident_warps(128, 8192, 256) == 16  # 2 blocks of 8 warps fill 64K registers
    assert resident_warps(32, 8192, 256) == 64  # the warp limit
    assert resident_warps(32, 100_000, 128) == 8  # two blocks' shared memory fit in 228 KiB
    assert resident_warps(121, 0, 256) == 16  # 121 registers are allocated as 128


@pytest.mark.slow
def test_simulator_run_writes_table_plot_and_sweep(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["--shapes", "5x7x3", "--kernels", "naive", "--repeats", "1",
                 "--plot", str(tmp_path / "p.png"), "--plot-sizes", "4,8", "--sweep-v4",
                 "--sweep-tiles", "32x32x4/16x16/2x4,32x32x4/16x16/4x4",
                 "--sweep-shapes", "9x9x5", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [r["status"] for r in report["rows"]] == ["ok"]
    assert [r["shape"] for r in report["plot_rows"]] == ["4x4x4", "8x8x8"]
    assert (tmp_path / "p.png").stat().st_size > 0
    ran, refused = report["sweep_v4"]
    assert ran["status"] == "ok" and ran["results"]["9x9x5"]["gflops"] > 0
    assert refused["status"].startswith("refused") and "not 32" in refused["status"]
    assert "Version 4 tile sweep" in capsys.readouterr().out


@pytest.mark.slow
def test_ptxas_report_without_a_gpu():
    """Where the CUDA toolkit is installed, version 4 compiles to PTX for sm_90 and ptxas
    reports its registers (the handout's table), with or without a GPU."""
    import os
    import shutil
    from pathlib import Path

    from tests.conftest import run_kit

    home = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    if not (home / "bin" / "ptxas").is_file() and not shutil.which("ptxas"):
        pytest.skip("no CUDA toolkit (ptxas) here")
    result = run_kit("nnkit.ptxas_report", "--tiles", "64x64x8/32x16/4x4",
                     env={"NUMBA_ENABLE_CUDASIM": "0", "CUDA_HOME": str(home)})
    if "could not compile" in result.stdout and "NVVM" in result.stdout:
        pytest.skip("the CUDA toolkit here has no libNVVM")
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"64x64x8/32x16/4x4 .*Used \d+ registers", result.stdout), result.stdout
