"""Version 4 (hierarchical tiling): awkward shapes under the race and index checker, the
tile-size factory of the tuning sweep, and the bonus switch of the grading config.

The simulator runs a Python thread per CUDA thread (256 a block with the default tiles),
so the shapes are small; tile edges are crossed with a small-tile variant as well.
"""

import numpy as np
import pytest

from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config
from nnkit.gemm_tiles import TileError, problems, tile_sizes, variant, variant_module
from nnkit.submission import NAMED, load_function, load_module
from tests.gemm_checking import check_clean

SMALL_TILES = dict(BM=32, BN=32, BK=4, WM=16, WN=16, TM=2, TN=4)  # 4 warps, 128 threads


def _check_clean(launch, M, N, K, trans_a=False, trans_b=False, beta=5.0, alpha=2.0):
    """tests/gemm_checking.py's check, with this file's seeds."""
    check_clean(launch, M, N, K, trans_a, trans_b, alpha=alpha, beta=beta,
                seed=M * 31 + N * 7 + K)


@pytest.mark.parametrize("case", [
    (1, 1, 1, False, False, 0.0),
    (17, 67, 17, True, False, 5.0),   # A arrives as a transposed view; K ends mid-tile
    (67, 17, 67, False, True, 0.0),   # B transposed, 9 steps along K
    (129, 3, 8, False, False, -2.0),  # one row past the 128-row block tile: two blocks
], ids=lambda c: "x".join(map(str, c[:3])))
def test_default_tiles_on_awkward_shapes(case):
    _check_clean(load_function(NAMED["solution"], "gemm_4_hierarchical", "gemm_hierarchical"),
                 *case)


@pytest.mark.parametrize("case", [
    (33, 65, 13, False, False, 5.0),  # 2 x 3 blocks, every edge cut, 4 steps along K
    (32, 32, 4, True, True, 0.0),     # exactly one tile
    (1, 67, 17, True, False, 5.0),
], ids=lambda c: "x".join(map(str, c[:3])))
def test_small_tile_variant_crosses_every_edge(case):
    _check_clean(variant(NAMED["solution"], **SMALL_TILES), *case)


def test_variant_compiles_its_own_constants():
    module = variant_module(NAMED["solution"], **SMALL_TILES)
    assert tile_sizes(module) == SMALL_TILES
    assert module.THREADS == 128 and module.A_LOADS == 1 and module.B_LOADS == 1
    # The kit's module keeps its own tiles: the variant is a separate copy.
    original = load_module(NAMED["solution"], "gemm_4_hierarchical")
    assert tile_sizes(original) != SMALL_TILES and problems(**tile_sizes(original)) == []


@pytest.mark.parametrize("tiles, why", [
    (dict(WM=48), "warp tiles must divide"),
    (dict(TM=4), "not 32"),
    (dict(BK=64), "shared memory"),
    (dict(BK=1), "whole number"),
    (dict(BM=256, BN=64, WM=128, TM=16), "must divide the 128 threads"),
])
def test_impossible_tiles_are_refused(tiles, why):
    # Each a change from one valid choice (the largest of the sweep's usual ones).
    base = dict(BM=128, BN=128, BK=8, WM=64, WN=32, TM=8, TN=8)
    with pytest.raises(TileError, match=why):
        variant_module(NAMED["solution"], **{**base, **tiles})


def test_unknown_constant_is_refused():
    with pytest.raises(TileError, match="not a tile size"):
        variant_module(NAMED["solution"], THREADS=64)


def test_bonus_is_off_by_default_and_must_be_a_boolean(tmp_path):
    assert load_config().bonus is False
    text = DEFAULT_CONFIG.read_text()
    assert "[bonus]\n" in text and "enabled = false" in text
    on = tmp_path / "on.toml"
    on.write_text(text.replace("enabled = false", "enabled = true", 1))
    assert load_config(on).bonus is True
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("enabled = false", 'enabled = "false"', 1))
    with pytest.raises(ConfigError, match="enabled"):
        load_config(bad)
    load_config()  # back to the kit's settings for the rest of the session


@pytest.mark.slow
def test_solution_network_trains_on_version_4(tmp_path):
    """Part 2's solution with version 4 as its GEMM ends one epoch where the CPU reference
    does: relative max-norm <= 1e-4, the grader's agreement bound (net.agreement)."""
    from tests.conftest import run_kit

    small = ["--data", "sample", "--limit", "60", "--pool", "4", "--hidden", "6",
             "--batch", "25", "--epochs", "1"]
    saved = {}
    for name, impl in (("reference", []), ("v4", ["--impl", "solution", "--gemm",
                                                  "hierarchical"])):
        saved[name] = tmp_path / f"{name}.npz"
        result = run_kit("nnkit", "train", *impl, *small, "--save", str(saved[name]))
        assert result.returncode == 0, result.stderr[-2000:]
    with np.load(saved["reference"]) as ref, np.load(saved["v4"]) as got:
        for key in ("W1", "b1", "W2", "b2"):
            expected = ref[key].astype(np.float64)
            error = np.abs(got[key] - expected).max() / np.abs(expected).max()
            assert error <= 1e-4, (key, error)
