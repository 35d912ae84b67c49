"""What the compiler gave each compiled kernel: registers, shared memory, local memory.

numba-cuda reports these per compiled signature (a kernel compiled for row-major operands
and again for transposed views has two entries). Local memory above zero means spills
(or a local array that was not kept in registers): slow, off-chip traffic in the inner
loop. Occupancy follows from registers and shared memory, estimated here for a GPU of
compute capability 8.0 or later (64K registers and 64 warps per SM).
"""

from __future__ import annotations

from types import ModuleType

REGISTERS_PER_SM = 65536
WARPS_PER_SM = 64
BLOCKS_PER_SM = 32
REGISTER_GRANULE = 8  # registers are allocated per thread in multiples of 8 (256 per warp)


def compiled_kernels(module: ModuleType) -> dict[str, object]:
    """The module's @cuda.jit dispatchers that have compiled at least one signature (none
    in the simulator, where kernels are not compiled)."""
    return {name: obj for name, obj in vars(module).items()
            if hasattr(obj, "get_regs_per_thread") and getattr(obj, "overloads", None)}


def _layouts(signature: tuple) -> str:
    """'C,A,C'-like: the memory layout numba saw for each array argument."""
    return ",".join(getattr(t, "layout", "?") for t in signature if hasattr(t, "layout"))


def resources(module: ModuleType) -> list[dict]:
    """One row per compiled kernel and signature: name, layouts, registers per thread,
    static shared memory per block and local memory per thread (bytes)."""
    rows = []
    for name, dispatcher in compiled_kernels(module).items():
        for signature, kernel in dispatcher.overloads.items():
            rows.append({"kernel": name, "layouts": _layouts(signature),
                         "registers": int(kernel.regs_per_thread),
                         "shared_bytes": int(kernel.shared_mem_per_block),
                         "local_bytes": int(kernel.local_mem_per_thread)})
    return rows


def resident_warps(registers: int, shared_bytes: int, threads: int,
                   shared_per_sm: int = 228 * 1024) -> int:
    """Warps per SM that registers, shared memory and the block limit allow (an estimate:
    the driver reserves 1 KiB of shared memory per block, counted here)."""
    warps = -(-threads // 32)
    per_thread = -(-max(registers, 1) // REGISTER_GRANULE) * REGISTER_GRANULE
    by_registers = REGISTERS_PER_SM // (per_thread * 32 * warps)
    by_shared = shared_per_sm // (shared_bytes + 1024)
    blocks = min(by_registers, by_shared, BLOCKS_PER_SM, WARPS_PER_SM // warps)
    return blocks * warps


def format_resources(rows: list[dict]) -> str:
    lines = [f"{'version':<13} {'kernel':<26} {'layouts':<8} {'regs':>5} {'shared B':>9} "
             f"{'local B':>8}  spills?"]
    for r in rows:
        spill = "yes: local memory in use" if r["local_bytes"] else "no"
        lines.append(f"{r.get('version', ''):<13} {r['kernel']:<26} {r['layouts']:<8} "
                     f"{r['registers']:>5} {r['shared_bytes']:>9} {r['local_bytes']:>8}  {spill}")
    return "\n".join(lines)
