"""The combined item's verdict: the submission's network on two ranks, under its Part 3
functions, against the same network in one process and against the CPU reference.

Two checks, both required:

1. split: every rank's W and b against the submission's own network trained in one
   process, within split_tolerance() (below). Only the splitting of the batches differs
   between the two runs, so a Part 2 bug alone (one that is the same whatever the rows)
   passes this check, and a Part 3 bug (a lost row, a wrong weight, no communication)
   fails it.
2. reference: every rank's W and b against the CPU reference trained by the grader in
   one process, within Part 2's criterion (relative max-norm <= AGREEMENT_TOL). This is
   what the assignment asks of the combined program; it also stops a network that does
   not train at all (both runs left at their initial values) from passing check 1.

Beside the checks, the calls are audited as Part 2's training is (grader/worker/net.py's
Audited): every call must launch the submission's own kernels (silent_calls), a few calls
drawn from the secret are replayed from their inputs (unreplayed_calls), and the network
modules must pass Part 2's source policy (grader/parts/mpi_combined.py). A network computed
on the host beside an empty kernel earns nothing here, as in Part 2.

So a Part 2 bug that fails net.agreement also fails this item, and a Part 3 bug that
changes training fails it: each costs this one item besides its own part's items, and
nothing else (Part 3's other items use the kit's network, Part 2's items no MPI).

The tolerance of check 1, from float32 rounding (u = 2^-24, gamma(k) = k u / (1 - k u)).
In exact arithmetic the two runs are equal at every step: rank r's gradient is the mean
over its n_r rows, and the all-reduce's sum of (n_r / n) g_r is the mean over all n rows.
In float32 they differ in the order of the sums only. For one element of one step:

- one process sums the n rows' terms in some order and scales by 1/n: within gamma(n)
  of the exact value, relative to the sum of the terms' magnitudes;
- two ranks: each sums its n_r <= n terms and scales by 1/n_r (gamma(n_r)), then the
  all-reduce rounds the share n_r / n, the product and the 2-term sum (Part 3's weighted
  all-reduce bound gamma(p + 2) with p = 2): within gamma(n + 3);
- the activations the terms are made of come from dot products of at most `fan_in`
  terms whose order may depend on how many rows a product holds (BLAS and cuBLAS pick
  their kernels by shape): gamma(fan_in) on each side, to first order.

The two gradients are then within gamma(2 n + 2 fan_in + 3) of each other, relative to
the magnitudes. A step moves the parameters by lr * g; as long as no step moves a
parameter by more than its own size (lr |g| <= max |W|, true of any training that
converges) and the terms do not cancel much, one step adds at most that much to the
relative max-norm of the difference, and to first order the steps add up:

    tolerance = sum over the steps of gamma(2 n_t + 2 fan_in + 3).

Reduced configuration (3 steps of 19, 19 and 1 rows, fan-in 49): 2.3e-5; measured with
the solution, about 1e-7. On a GPU with MNIST (12 steps of 800 rows, fan-in 784) it comes to
about 2e-3, looser than check 2's 1e-4, which then decides.
"""

from __future__ import annotations

import numpy as np

from grader.checks.mpi import rows_shared
from grader.checks.net import AGREEMENT_TOL, relative_norms
from grader.worker.mpi_combined import NETWORK_CALLS  # the order of the counts' arrays
from nnkit import network
from nnkit.gemm_reference import gamma


def split_tolerance(batches: list[int], fan_in: int) -> float:
    """Check 1's bound on the relative max-norm (see the module's text)."""
    return float(sum(gamma(2 * n + 2 * fan_in + 3) for n in batches))


def silent_calls(runs: list[list[dict[str, np.ndarray]]]) -> str:
    """'' when every call of the network's functions, on every rank of every case,
    launched the submission's own kernels; else what did not (Part 2's rule: training
    must run on your kernels, not on the host or a library)."""
    for case, ranks in zip(("in one process", "on 2 ranks"), runs, strict=False):
        for r, arrays in enumerate(ranks):
            silent, calls = arrays.get("silent"), arrays.get("calls")
            if silent is None or calls is None or silent.shape != (len(NETWORK_CALLS),) \
                    or calls.shape != silent.shape:
                return f"rank {r} {case}: no count of the network's calls"
            for name, quiet, total in zip(NETWORK_CALLS, silent.tolist(), calls.tolist(),
                                          strict=True):
                if quiet:
                    return (f"rank {r} {case}: {quiet} of {total} call(s) of {name}() "
                            "launched none of your kernels: training must run on your "
                            "kernels")
    return ""


REPLAY_TOL = 1e-5  # as Part 2's training audit (grader/parts/net.py): relative max-norm


def unreplayed_calls(runs: list[list[dict[str, np.ndarray]]]) -> str:
    """'' when, on every rank of every case, the calls recorded in full were reproduced
    by replaying the kernels they launched (Part 2's audit of training calls); else which
    were not: a result made on the host or by a library beside a kernel that launches."""
    for case, ranks in zip(("in one process", "on 2 ranks"), runs, strict=False):
        for r, arrays in enumerate(ranks):
            missing, worst = arrays.get("audit_missing"), arrays.get("audit_worst")
            if missing is None or worst is None or missing.ndim != 1 \
                    or worst.shape != missing.shape or missing.size == 0:
                return f"rank {r} {case}: no call of the network was recorded in full"
            for n, (lost, diff) in enumerate(zip(missing.tolist(), worst.tolist(),
                                                 strict=True)):
                if lost or not diff <= REPLAY_TOL:
                    return (f"rank {r} {case}: recorded call {n + 1}: the result is not what "
                            f"the kernels the call launched compute ({lost} output(s) not in "
                            f"memory its kernels touched, largest relative difference "
                            f"{diff:.2g}): training must run on your kernels")
    return ""


def shared_rows(alone: dict[str, np.ndarray], ranks: list[dict[str, np.ndarray]],
                batches: list[int]) -> str:
    """Why the ranks did not share the minibatches out, or '' (grader/checks/mpi.py's
    rows_shared: every row once between them, each rank its even share): the one process
    must have trained on every row of `batches`, and the ranks between them likewise."""
    one = alone.get("rows")
    if one is None or getattr(one, "shape", None) != (1,) or int(one[0]) != sum(batches):
        return "no count of the rows the one process trained on, or not every row"
    problem = rows_shared([r.get("rows") for r in ranks], batches, "the one process")
    return f"a Part 3 problem: {problem}" if problem else ""


def largest_difference(got: list[dict[str, np.ndarray]], want: dict[str, np.ndarray]
                       ) -> tuple[float, str, str]:
    """(worst relative max-norm, where, problem) of every rank's arrays against `want`;
    problem is '' when every array is there, float32, of the right shape and finite."""
    worst, where = 0.0, ""
    for r, arrays in enumerate(got):
        for key, ref in want.items():
            have = arrays.get(key)
            if have is None or have.shape != ref.shape or have.dtype != np.float32:
                return np.inf, "", f"rank {r}: {key} missing or not float32{ref.shape}"
            if not np.isfinite(have).all():
                return np.inf, "", f"rank {r}: {key} holds NaN or infinity"
            rel = relative_norms(have, ref)[0]
            if rel > worst or not where:
                worst, where = max(rel, worst), f"rank {r}'s {key}"
    return worst, where, ""


def check_combined(alone: dict[str, np.ndarray], ranks: list[dict[str, np.ndarray]],
                   reference: network.Params, tolerance: float) -> tuple[bool, str, list[dict]]:
    """alone: the one-process run's arrays; ranks: each rank's after the two-rank run;
    reference: the grader's CPU training. Returns (passed, message, check rows)."""
    ref = reference.named()
    own, own_where, problem = largest_difference([alone], ref)
    own_where = own_where.removeprefix("rank 0's ")
    if problem:
        message = f"your network in one process: {problem.removeprefix('rank 0: ')}"
        return False, message, [{"case": "your network in one process", "passed": False,
                                 "message": message}]
    alone = {k: alone[k] for k in ref}  # the parameters (the counts of calls aside)
    split, split_where, problem = largest_difference(ranks, alone)
    if problem:
        return False, problem, [{"case": "2 ranks", "passed": False, "message": problem}]
    versus_ref, ref_where, _ = largest_difference(ranks, ref)
    split_ok, ref_ok = split <= tolerance, versus_ref <= AGREEMENT_TOL
    rows = [
        {"case": "2 ranks against your network in one process", "passed": split_ok,
         "relative_max_norm": split, "tolerance": tolerance,
         "message": f"largest difference {split:.2e} ({split_where}), tolerance "
                    f"{tolerance:.2e} (float32 rounding of the split sums)"},
        {"case": "2 ranks against the CPU reference", "passed": ref_ok,
         "relative_max_norm": versus_ref, "tolerance": AGREEMENT_TOL,
         "message": f"largest difference {versus_ref:.2e} ({ref_where}), tolerance "
                    f"{AGREEMENT_TOL:g} (Part 2's criterion); your network in one process: "
                    f"{own:.2e} ({own_where})"},
    ]
    if split_ok and ref_ok:
        return True, (f"2 ranks agree with your network in one process ({split:.1e}) and "
                      f"with the CPU reference ({versus_ref:.1e})"), rows
    if not split_ok:
        if own <= AGREEMENT_TOL:
            blame = ("a Part 3 problem: your scatter_batch and allreduce_gradients do not "
                     "make two ranks train as one process")
        else:
            blame = (f"your network in one process already differs from the CPU reference "
                     f"by {own:.1e} (a Part 2 problem: see net.agreement), in a way that "
                     "depends on how many rows a process holds, or Part 3 is wrong too "
                     "(mpi.data_parallel checks Part 3 with the kit's network)")
        return False, (f"{split_where} on 2 ranks differs from your network in one process "
                       f"by {split:.2e} (relative max-norm), over the {tolerance:.2e} bound: "
                       f"{blame}"), rows
    return False, (f"{ref_where} differs from the CPU reference by {versus_ref:.2e}, over "
                   f"the {AGREEMENT_TOL:g} tolerance, while 2 ranks agree with your network "
                   f"in one process ({split:.1e}): a Part 2 problem (your network in one "
                   f"process differs by {own:.1e}; see net.agreement)"), rows
