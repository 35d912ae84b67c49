"""Whether a GEMM kernel is the version its file names, from the memory traffic of one of
its graded calls in the simulator (grader/worker/memcount.py counts loads and threads).

Correct results alone do not tell the versions apart: the naive kernel copied into
gemm_2_shared.py and gemm_3_register.py computes every case right. The handout asks the
shared-memory version to stage tiles of A and B in shared memory, and the register version
to have each thread compute several elements of C (16 in the handout's design), so:

- shared: the call loads from shared memory (static or dynamic) at least
  MIN_SHARED_LOADS_PER_FMA times per multiply-add, and from global memory at most
  SHARED_GLOBAL_LOADS_PER_FMA times. A naive kernel loads twice from global memory (one
  element of A and one of B per multiply-add); tiles of T x T load about 2/T, and even
  staging one operand only loads about once. A tiled kernel reads its operands from
  shared memory: twice per multiply-add, or 2/m with m x m micro-tiles kept in registers
  (1/4 for 8x8). A token shared array the kernel does not compute from leaves the global
  loads at two, or, where each thread computes a few elements straight from global memory
  (a micro-tile without tiles: 1.3 global loads per multiply-add for three elements a
  thread), the shared loads near none. And the shared loads must return, by value, at
  least MIN_OPERAND_SHARE of the elements of A and B (a token read from shared memory at
  every step beside a product from global memory returns one value, however often).
- register, hierarchical: some kernel of the call stores C from at most one thread per
  MIN_OUTPUTS_PER_THREAD elements of C and does a product's share of the loads (global
  and shared, at least MIN_LOAD_SHARE of the multiply-adds: a 64x64 tile staged in shared
  memory loads 1/32 from global), storing at least one value per element of C (its
  result, or partial sums: not a decoy that reads A once and stores one element beside a
  naive kernel). Another kernel may scale C by beta, a thread per
  element; the naive and shared kernels run a thread per element of C. The threads
  counted are those that stored to global memory: a block's threads past C's edge
  launch but compute nothing (a 2x2 micro-tile on 32x32 tiles launches 1,024 threads for
  the 1,320 elements of the counted case, and 340 of them store C).

The call counted is a graded one (grader/cases/gemm.py COUNTED_SHAPE), counted while it is
graded: a launcher cannot behave otherwise when counted, since this call's C is checked as
every case's. A GPU counts nothing: a GPU run runs the counted case once more in the
simulator for this rule (grader/parts/gemm.py, version_on_simulator).
"""

from __future__ import annotations

from pathlib import Path

from grader.cases.gemm import GemmCase, counted_case
from grader.checks import simperf
from grader.worker import COUNTS_SUFFIX

SHARED_GLOBAL_LOADS_PER_FMA = 1.5
MIN_SHARED_LOADS_PER_FMA = 1 / 16  # a 32x32 micro-tile reading both operands from shared
# Of the elements of A and B, the share that some shared-memory load returns (by value):
# tiles of both operands hold them all, a tile of one operand about half (A and B of the
# counted case are 1,221 and 1,480 elements), a token beside global loads next to none.
MIN_OPERAND_SHARE = 1 / 3
# Elements of C per storing thread, on average: at least 1.5, not 2, since the counted
# case's 33 rows leave a 2x1 micro-tile's last row of threads one element each (680
# threads store its 1,320 elements); a naive kernel's threads store one each.
MIN_OUTPUTS_PER_THREAD = 1.5
MIN_LOAD_SHARE = 1 / 64
RULED = ("shared", "register", "hierarchical")


def problem(kernel: str, outdir: Path, cases: list[GemmCase]) -> str:
    """'' when the counted graded call looks like the version `kernel` names, else why
    not, in words for the feedback. For an item whose cases all passed."""
    n = counted_case(cases)
    if kernel not in RULED or n is None:
        return ""
    counts, why = simperf.read_counts(outdir, f"case-{n}{COUNTS_SUFFIX}", f"case-{n}.err")
    if counts is None:
        return f"the version could not be told from the call counted on {cases[n].label()}: {why}"
    return rule_problem(kernel, counts, cases[n])


def rule_problem(kernel: str, counts: dict[str, dict], case: GemmCase) -> str:
    """The rule of `kernel`'s version on the counts of one call of `case` ('' if met)."""
    fmas, outputs = case.M * case.N * case.K, case.M * case.N
    where = f"counted on {case.label()}"

    def total(key: str) -> int:
        return sum(int(c.get(key, 0)) for c in counts.values())

    if kernel == "shared":
        per_fma = total("global_load_accesses") / fmas
        shared_per_fma = total("shared_load_accesses") / fmas
        if shared_per_fma < MIN_SHARED_LOADS_PER_FMA:
            read = (f"{shared_per_fma:.3f} values per multiply-add" if shared_per_fma
                    else "nothing")
            return (f"the shared-memory version reads {read} from shared memory ({where}; "
                    f"tiles staged there are read at least {MIN_SHARED_LOADS_PER_FMA:.3f} "
                    "times per multiply-add): a kernel that does not compute from tiles in "
                    "shared memory is not this version")
        elements = max(int(c.get("operand_elements", 0)) for c in counts.values())
        staged = sum(int(c.get("shared_operand_elements", 0)) for c in counts.values())
        if elements and staged < MIN_OPERAND_SHARE * elements:
            return (f"the shared-memory version's shared-memory loads return {staged} of the "
                    f"{elements} elements of A and B ({where}; tiles staged there hold all of "
                    "them): its product is not computed from tiles in shared memory")
        if per_fma > SHARED_GLOBAL_LOADS_PER_FMA:
            return (f"the shared-memory version loads {per_fma:.2f} values from global memory "
                    f"per multiply-add ({where}; a naive kernel loads 2, tiles staged in shared "
                    f"memory at most {SHARED_GLOBAL_LOADS_PER_FMA:g}): its tiles are not what it "
                    "computes from")
    if kernel in ("register", "hierarchical"):
        def blocked(c: dict) -> bool:
            loads = int(c.get("global_load_accesses", 0)) + int(c.get("shared_load_accesses", 0))
            threads = int(c.get("storing_threads", 0))
            return (0 < threads * MIN_OUTPUTS_PER_THREAD <= outputs
                    and loads >= MIN_LOAD_SHARE * fmas
                    and int(c.get("global_store_accesses", 0)) >= outputs)

        if not any(blocked(c) for c in counts.values()):
            fewest = min(int(c.get("storing_threads", 0)) for c in counts.values())
            return (f"the {kernel} version has no kernel that computes the product with at "
                    f"least {MIN_OUTPUTS_PER_THREAD:g} elements of C a thread ({where}: "
                    f"{outputs} elements, stored by {fewest} threads in its kernel with "
                    "the fewest storing threads): register blocking has each thread "
                    "compute several")
    return ""
