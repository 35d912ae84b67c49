"""Version 4 of the GEMM with other tile sizes: one compiled copy of the module per choice.

numba compiles module constants into a kernel as literals, so the tile sizes of
solution/gemm_4_hierarchical.py cannot change after import. `variant()` is the factory
the tuning sweep needs: it executes the module's source once more, as a module of its
own, with the given constants substituted, so that every derived constant (threads per
block, loads per thread) and the launcher follow from them as in the original.

    launch = variant(folder, BM=64, BN=128, WM=32, WN=64)   # a launcher of the usual kind
"""

from __future__ import annotations

import re
import types
from pathlib import Path

from nnkit.gemm import KERNELS, Launcher

MODULE, FUNCTION = KERNELS["hierarchical"]
KERNEL = "gemm_hierarchical_kernel"
TILES = ("BM", "BN", "BK", "WM", "WN", "TM", "TN")
SHARED_LIMIT = 48 * 1024  # bytes of static shared memory a numba kernel may declare


class TileError(ValueError):
    """A choice of tile sizes the kernel's design cannot run."""


def problems(BM: int, BN: int, BK: int, WM: int, WN: int, TM: int, TN: int,
             PAD: int = 4) -> list[str]:
    """Why these tile sizes do not fit the kernel's design (an empty list: they do)."""
    found = []
    if BM % WM or BN % WN:
        found.append("warp tiles must divide the block tile")
    if WM % TM or WN % TN:
        found.append("thread tiles must divide the warp tile")
    elif (WM // TM) * (WN // TN) != 32:
        found.append(f"a warp tile holds {(WM // TM) * (WN // TN)} thread tiles, not 32")
    threads = 32 * (BM // WM) * (BN // WN) if WM and WN else 0
    if not 32 <= threads <= 1024:
        found.append(f"{threads} threads per block")
    elif (BM * BK) % threads or (BN * BK) % threads:
        found.append("each thread must stage a whole number of elements of A and B")
    elif threads % BM or threads % BN or threads % BK:
        # The staging threads keep their index along the contiguous dimension from one
        # element to the next (the kernel's a_dk or a_dm is 0): BM, BN, BK divide THREADS.
        found.append(f"BM, BN and BK must divide the {threads} threads of a block")
    shared = 2 * BK * (BM + BN + 2 * PAD) * 4
    if shared > SHARED_LIMIT:
        found.append(f"{shared} bytes of shared memory (at most {SHARED_LIMIT})")
    return found


def variant_source(source: str, **tiles: int) -> str:
    """The module's source with the given constants substituted."""
    for name, value in tiles.items():
        if name not in TILES:
            raise TileError(f"{name}: not a tile size ({', '.join(TILES)})")
        source, count = re.subn(rf"^{name} = \d+", f"{name} = {int(value)}", source,
                                flags=re.MULTILINE)
        if count != 1:
            raise TileError(f"{name}: expected one line `{name} = <number>` in the module")
    return source


def tile_sizes(module: types.ModuleType) -> dict[str, int]:
    return {name: getattr(module, name) for name in TILES}


def variant_module(folder: Path, **tiles: int) -> types.ModuleType:
    """A fresh copy of version 4's module with these tile sizes, compiled on first launch."""
    path = Path(folder) / f"{MODULE}.py"
    source = variant_source(path.read_text(), **tiles)
    tag = "_".join(f"{k}{v}" for k, v in sorted(tiles.items()))
    module = types.ModuleType(f"{MODULE}__{tag}")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - the kit's own code
    found = problems(**tile_sizes(module), PAD=getattr(module, "PAD", 4))
    if found:
        raise TileError(f"{tag}: " + "; ".join(found))
    return module


def variant(folder: Path, **tiles: int) -> Launcher:
    """The launcher of version 4 compiled with these tile sizes (the others as in the file)."""
    return getattr(variant_module(folder, **tiles), FUNCTION)
