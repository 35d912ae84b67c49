"""The parent's verdicts on raw worker output, fed with hand-made result files."""

import json

import numpy as np

from grader.cases.gemm import GemmCase, Operands, build_operands, replay_operands
from grader.checks.gemm import check_case, check_perf
from grader.worker.layout import call_factors, perturbed_a, sample_positions
from nnkit.gemm_reference import reference

CASE = GemmCase(5, 7, 9, 2.0, 5.0, guard=True, seed=3)
SECRET, PERF_SEED = 1234, 77


def _correct_c(case, call=None, calls=8):
    """The operands and a right C; for timed call number `call`, with its new A."""
    ops = build_operands(case, SECRET)
    if call is not None:
        factor = call_factors(PERF_SEED, calls)[call]
        ops = Operands(perturbed_a(ops.A_buf, factor), ops.B_buf, ops.C_buf, ops.interior)
    A, B, C = ops.views()
    C_buf = ops.C_buf.copy()
    C_buf[ops.interior] = reference(A, B, C, case.alpha, case.beta).astype(np.float32)
    return ops, C_buf


def _write_case(tmp_path, ops, C_buf, A=None, launches=1, replay_C=None):
    extra = {} if replay_C is None else {"replay:C": replay_C}
    np.savez(tmp_path / "case-0.npz", A=ops.A_buf if A is None else A, B=ops.B_buf, C=C_buf,
             **{"launch:own": np.array(launches)}, **extra)


def _check(tmp_path, **kwargs):
    return check_case(CASE, tmp_path, 0, "", secret=SECRET, **kwargs)


def test_correct_result_passes(tmp_path):
    ops, C_buf = _correct_c(CASE)
    _write_case(tmp_path, ops, C_buf)
    assert _check(tmp_path).passed


def test_write_past_the_edge_is_caught(tmp_path):
    ops, C_buf = _correct_c(CASE)
    C_buf[0, 0] = 1.0  # in the guard border
    _write_case(tmp_path, ops, C_buf)
    outcome = _check(tmp_path)
    assert not outcome.passed and "outside C" in outcome.message


def test_modified_input_is_caught(tmp_path):
    ops, C_buf = _correct_c(CASE)
    A = ops.A_buf.copy()
    A[3, 3] += 1
    _write_case(tmp_path, ops, C_buf, A=A)
    outcome = _check(tmp_path)
    assert not outcome.passed and "modified its input A" in outcome.message


def test_one_wrong_element_is_located(tmp_path):
    ops, C_buf = _correct_c(CASE)
    C_buf[ops.interior][4, 6] += 1e-3
    _write_case(tmp_path, ops, C_buf)
    outcome = _check(tmp_path)
    assert not outcome.passed
    assert "1 of 35 elements wrong, in rows 4 and columns 6" in outcome.message


def test_a_call_that_launched_no_kernel_fails(tmp_path):
    ops, C_buf = _correct_c(CASE)
    _write_case(tmp_path, ops, C_buf, launches=0)
    outcome = _check(tmp_path)
    assert not outcome.passed and "launched none of the submission's kernels" in outcome.message


def test_a_call_that_launched_the_kits_kernels_fails(tmp_path):
    ops, C_buf = _correct_c(CASE)
    np.savez(tmp_path / "case-0.npz", A=ops.A_buf, B=ops.B_buf, C=C_buf,
             **{"launch:own": np.array(1), "launch:other": np.array(3)})
    outcome = _check(tmp_path)
    assert not outcome.passed and "kernels that are not the submission's" in outcome.message


def test_a_result_the_replay_does_not_reproduce_fails(tmp_path):
    ops, C_buf = _correct_c(CASE)
    again = replay_operands(CASE, SECRET)  # what the replay starts from: new operands
    A, B, C = again.views()
    right = again.C_buf.copy()
    right[again.interior] = reference(A, B, C, CASE.alpha, CASE.beta).astype(np.float32)
    _write_case(tmp_path, ops, C_buf, replay_C=again.C_buf)  # the kernels left C as it was
    outcome = _check(tmp_path, replayed=True)
    assert not outcome.passed and "do not compute the product of their inputs" in outcome.message
    # The call's own answer again, as kernels handed it by the host as scalars give it
    _write_case(tmp_path, ops, C_buf, replay_C=C_buf)
    outcome = _check(tmp_path, replayed=True)
    assert not outcome.passed and "on new operands of the same shapes" in outcome.message
    _write_case(tmp_path, ops, C_buf)  # no replay output at all
    assert "not in memory any recorded kernel" in _check(tmp_path, replayed=True).message
    _write_case(tmp_path, ops, C_buf, replay_C=right)
    assert _check(tmp_path, replayed=True).passed
    assert not np.array_equal(again.A_buf, ops.A_buf)  # new values, same layout
    assert again.A_buf.shape == ops.A_buf.shape and np.isnan(again.A_buf[0, 0])


def test_missing_result_says_why(tmp_path):
    outcome = check_case(CASE, tmp_path, 0, "stopped after the 5 s time limit")
    assert not outcome.passed and "time limit" in outcome.message


def _samples(calls, replay=False):
    """What the worker keeps of C after each timed call: right values for each call's A
    (or, replaying, the first call's values every time)."""
    rows, cols = sample_positions(CASE, PERF_SEED)
    picks = []
    for n in range(calls):
        ops, C_buf = _correct_c(CASE, 0 if replay else n)
        picks.append(C_buf[ops.interior][rows, cols])
    return np.stack(picks)


def _write_perf(tmp_path, C_buf, host, device, samples=None, launches=None):
    samples = _samples(len(host)) if samples is None else samples
    _, extra_C = _correct_c(CASE, call=len(host))
    np.savez(tmp_path / "perf-0.npz", C=C_buf, samples=samples, extra_C=extra_C,
             **{"launch:own": np.array(1), "replay:C": extra_C})
    launches = [1] * len(host) if launches is None else launches
    (tmp_path / "perf-0.json").write_text(json.dumps({"host": host, "device": device,
                                                      "launches": launches}))


def _perf(tmp_path):
    return check_perf(CASE, tmp_path, 0, "", secret=SECRET, perf_seed=PERF_SEED)


def test_perf_counts_the_gpu_time(tmp_path):
    _, C_buf = _correct_c(CASE, call=1)
    _write_perf(tmp_path, C_buf, [3e-4, 2e-4], [1e-4, 2e-4])
    assert _perf(tmp_path).seconds == 1e-4


def test_perf_rejects_work_outside_the_events(tmp_path):
    _, C_buf = _correct_c(CASE, call=1)
    _write_perf(tmp_path, C_buf, [0.05, 0.05], [1e-5, 1e-5])
    outcome = _perf(tmp_path)
    assert outcome.seconds is None and "outside the timed stream" in outcome.message


def test_perf_rejects_wrong_results_and_bad_numbers(tmp_path):
    ops, C_buf = _correct_c(CASE, call=0)
    _write_perf(tmp_path, ops.C_buf, [1e-4], [1e-4])  # C never computed
    assert "wrong C" in _perf(tmp_path).message
    _write_perf(tmp_path, C_buf, [1e-4], [-1.0])
    assert "unreadable timing" in _perf(tmp_path).message


def test_perf_rejects_a_replayed_result(tmp_path):
    _, C_buf = _correct_c(CASE, call=2)  # the last call right, the one before replayed
    _write_perf(tmp_path, C_buf, [1e-4] * 3, [1e-4] * 3, samples=_samples(3, replay=True))
    message = _perf(tmp_path).message
    assert "timed call 2 of 3 computed a wrong C" in message and "replayed" in message


def test_perf_rejects_calls_whose_kernels_ran_outside_the_timer(tmp_path):
    _, C_buf = _correct_c(CASE, call=1)
    _write_perf(tmp_path, C_buf, [1e-4, 1e-4], [1e-4, 1e-4], launches=[1, 0])
    assert "launched none of the submission's kernels inside the timed" in _perf(tmp_path).message


def test_wrong_values_carry_a_hint(tmp_path):
    """The message of a case wrong in a recognised way ends with its hint
    (grader/checks/hints.py): here beta*C left out."""
    ops, C_buf = _correct_c(CASE)
    A, B, C = ops.views()
    C_buf[ops.interior] = reference(A, B, C, CASE.alpha, 0.0).astype(np.float32)
    _write_case(tmp_path, ops, C_buf)
    outcome = _check(tmp_path)
    assert not outcome.passed
    assert "35 of 35 elements wrong" in outcome.message
    assert outcome.message.endswith("; hint: β·C is missing: the result is α·AB alone "
                                    "(add β·C when β ≠ 0)")


def test_wrong_values_without_a_pattern_carry_no_hint(tmp_path):
    ops, C_buf = _correct_c(CASE)
    C_buf[ops.interior][2, 3] += 1e-3
    _write_case(tmp_path, ops, C_buf)
    outcome = _check(tmp_path)
    assert not outcome.passed and "hint" not in outcome.message


def test_perf_rejects_a_product_kept_from_the_first_call_and_rescaled(tmp_path):
    """A launcher that keeps P = A·B of its first timed call and, for each later call,
    reads the scale of the new A off one element and hands back α·r·P + β·C (O(MN) work,
    no product): right while calls differed by one factor for the whole of A; with a
    factor per column of A it is wrong."""
    calls = 3
    first, _ = _correct_c(CASE, call=0, calls=calls)
    A0, B, C = (x.astype(np.float64) for x in first.views())
    kept = A0 @ B
    rows, cols = sample_positions(CASE, PERF_SEED)
    picks = []
    for n in range(calls):
        ops, _ = _correct_c(CASE, call=n, calls=calls)
        ratio = float(ops.views()[0][1, 2]) / float(first.views()[0][1, 2])
        forged = CASE.alpha * ratio * kept + CASE.beta * C
        picks.append(forged.astype(np.float32)[rows, cols])
    _, C_buf = _correct_c(CASE, call=calls - 1, calls=calls)
    _write_perf(tmp_path, C_buf, [1e-4] * calls, [1e-4] * calls, samples=np.stack(picks))
    message = _perf(tmp_path).message
    assert "timed call 2 of 3 computed a wrong C" in message, message
    # while the samples of honest calls pass
    _write_perf(tmp_path, C_buf, [1e-4] * calls, [1e-4] * calls)
    assert _perf(tmp_path).message == "ok"
