"""Whether a GEMM kernel is the version its file names, from its counted call in the
simulator (grader/worker/memcount.py counts every load and the threads launched).

Correct results alone do not tell the versions apart: the naive kernel copied into
gemm_2_shared.py and gemm_3_register.py computes every case right. The handout asks the
shared-memory version to stage tiles of A and B in shared memory, and the register version
to have each thread compute several elements of C (16 in the handout's design), so:

- shared: the counted call loads from shared memory (or asks for dynamic shared memory,
  whose accesses are not counted), and from global memory at most
  SHARED_GLOBAL_LOADS_PER_FMA times per multiply-add. A naive kernel loads twice (one
  element of A and one of B per multiply-add); tiles of T x T load 2/T, and even staging
  one operand only loads about once. A token shared array the kernel does not read from
  its tiles leaves the global loads at two.
- register, hierarchical: the kernel that loads the most (the product's; another may
  scale C by beta first) runs at most one CUDA thread per MIN_OUTPUTS_PER_THREAD elements
  of C (the naive and shared kernels run a thread per element).

The counted call is made in the simulator only; on a GPU the speed items tell a naive
kernel from a blocked one. A call that was not counted is judged by its cases alone.
"""

from __future__ import annotations

from grader.cases.gemm import GemmCase

SHARED_GLOBAL_LOADS_PER_FMA = 1.5
MIN_OUTPUTS_PER_THREAD = 2


def problem(kernel: str, counts: dict[str, dict] | None, case: GemmCase | None) -> str:
    """'' when the counted call looks like the version `kernel` names (or was not
    counted), else why it does not, in words for the feedback."""
    if not counts or case is None:
        return ""
    fmas = case.M * case.N * case.K
    outputs = case.M * case.N
    total = {key: sum(int(c.get(key, 0)) for c in counts.values())
             for key in ("global_load_accesses", "shared_load_accesses", "threads",
                         "dynamic_shared_bytes")}
    if kernel == "shared":
        per_fma = total["global_load_accesses"] / fmas
        if not total["shared_load_accesses"] and not total["dynamic_shared_bytes"]:
            return ("the shared-memory version reads nothing from shared memory (counted on "
                    f"{case.label()}): a kernel without tiles staged in shared memory is not "
                    "this version")
        if per_fma > SHARED_GLOBAL_LOADS_PER_FMA:
            return (f"the shared-memory version loads {per_fma:.2f} values from global memory "
                    f"per multiply-add (counted on {case.label()}; a naive kernel loads 2, "
                    f"tiles staged in shared memory at most {SHARED_GLOBAL_LOADS_PER_FMA:g}): "
                    "its tiles are not what it computes from")
    if kernel in ("register", "hierarchical"):
        # The kernel that loads the most computes the product; others may scale C first.
        main = max(counts.values(), key=lambda c: int(c.get("global_load_accesses", 0))
                   + int(c.get("shared_load_accesses", 0)))
        threads = int(main.get("threads", 0))
        if threads and threads * MIN_OUTPUTS_PER_THREAD > outputs:
            return (f"the {kernel} version's product kernel runs {threads} threads for "
                    f"{outputs} elements of C (counted on {case.label()}): register "
                    f"blocking has each thread compute at least {MIN_OUTPUTS_PER_THREAD}")
    return ""
