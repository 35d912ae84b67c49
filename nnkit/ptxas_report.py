"""Registers and spills of version 4's tile choices without a GPU: numba -> PTX -> ptxas -v.

    python -m nnkit.ptxas_report [--tiles 128x128x8/64x32/8x8,...] [--arch sm_90]
    python -m nnkit.ptxas_report --thin      (the thin-product kernels, nnkit/gemm_thin.py)

Needs the CUDA toolkit's libNVVM and ptxas (CUDA_HOME, or /usr/local/cuda), not a GPU.
numba-cuda compiles the kernel to PTX for the given architecture and ptxas, the
assembler the driver would use, reports registers, spills and shared memory, the figures
`bench-gemm` reads from numba on a GPU. Run it in a process of its own: it imports
numba.cuda in GPU mode, which the kit's simulator mode forbids in the same process.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from nnkit.bench_gemm_sweep import DEFAULT_TILES, label, parse_tiles
from nnkit.gemm_tiles import FUNCTION, KERNEL, MODULE, variant_source
from nnkit.submission import NAMED

REPORT = re.compile(r"(Used \d+ registers.*|\d+ bytes stack frame.*)")


def _ptxas(arch: str) -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "ptxas"
    return str(candidate) if candidate.is_file() else shutil.which("ptxas")


def _numba_for_ptx(cc: tuple[int, int]) -> tuple:
    """(numba.cuda, numba.types), set up to compile PTX without NVRTC or a GPU."""
    import numba.cuda.cuda_paths as cuda_paths
    import numba.cuda.cudadrv.nvrtc as nvrtc

    # numba asks NVRTC which architectures exist and where it lives; PTX needs neither,
    # and a toolkit without NVRTC (or a CPU-only machine) would fail there.
    nvrtc.get_supported_ccs = lambda: (cc,)
    cuda_paths._get_nvrtc_path = lambda: ("none", None)
    from numba import cuda
    from numba import types as nt

    return cuda, nt


def _compile_ptx(source: str, path: Path, cc: tuple[int, int]) -> str:
    """PTX of the module's kernel for row-major float32 operands."""
    cuda, nt = _numba_for_ptx(cc)

    module = types.ModuleType(f"{MODULE}_ptx")
    source = source.replace("from nnkit.backend import cuda", "from numba import cuda")
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - the kit's own code
    array = nt.Array(nt.float32, 2, "C")
    signature = (array, array, array, nt.float32, nt.float32, nt.boolean, nt.boolean)
    assert callable(getattr(module, FUNCTION))
    ptx, _ = cuda.compile_ptx(getattr(module, KERNEL).py_func, signature, cc=cc)
    return ptx


def _assemble(ptxas: str, arch: str, ptx: str) -> str:
    """ptxas -v's report on one PTX module: registers, stack frame and spills."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run([ptxas, f"-arch={arch}", "-v", str(source), "-o",
                               str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True)
    return " | ".join(REPORT.findall(done.stderr) or [done.stderr.strip()[-200:]])


def thin_ptx(cc: tuple[int, int]) -> dict[str, str]:
    """PTX of each kernel of nnkit/gemm_thin.py, for the layouts of the network's thin
    products (A, B, C row-major or transposed views: numba's 'A' layout)."""
    cuda, nt = _numba_for_ptx(cc)
    path = Path(__file__).with_name("gemm_thin.py")
    module = types.ModuleType("gemm_thin_ptx")
    source = path.read_text().replace("from nnkit.backend import cuda, empty",
                                      "from numba import cuda\nempty = None")
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - the kit's own code
    matrix, work = nt.Array(nt.float32, 2, "A"), nt.Array(nt.float32, 3, "C")
    f32 = nt.float32
    signatures = {"rows_kernel": (matrix, matrix, matrix, f32, f32),
                  "columns_kernel": (matrix, matrix, matrix, work, f32, f32, nt.int64),
                  "finish_kernel": (work, matrix, f32, f32),
                  "outer_kernel": (matrix, matrix, matrix, f32, f32)}
    return {name: cuda.compile_ptx(getattr(module, name).py_func, signature, cc=cc)[0]
            for name, signature in signatures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnkit.ptxas_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--impl", type=Path, default=NAMED["solution"])
    parser.add_argument("--tiles", default=DEFAULT_TILES)
    parser.add_argument("--arch", default="sm_90", help="sm_XY (default sm_90, the H100)")
    parser.add_argument("--thin", action="store_true",
                        help="report the thin-product kernels instead of version 4's tiles")
    args = parser.parse_args(argv)
    match = re.fullmatch(r"sm_(\d)(\d+)", args.arch)
    ptxas = _ptxas(args.arch)
    if not match or ptxas is None:
        print("nnkit.ptxas_report: needs --arch sm_XY and ptxas (set CUDA_HOME)",
              file=sys.stderr)
        return 2
    cc = (int(match.group(1)), int(match.group(2)))
    if args.thin:
        for name, ptx in thin_ptx(cc).items():
            print(f"{name:<24} " + _assemble(ptxas, args.arch, ptx))
        return 0
    path = Path(args.impl) / f"{MODULE}.py"
    for tiles in parse_tiles(args.tiles):
        try:
            ptx = _compile_ptx(variant_source(path.read_text(), **tiles), path, cc)
        except Exception as err:  # noqa: BLE001 - report and go on with the next tiles
            print(f"{label(tiles):<24} could not compile: {type(err).__name__}: {err}"[:300])
            continue
        print(f"{label(tiles):<24} " + _assemble(ptxas, args.arch, ptx))
    return 0


if __name__ == "__main__":
    sys.exit(main())
