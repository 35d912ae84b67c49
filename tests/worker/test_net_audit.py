"""The training audit's comparison of a call with its replay (grader/worker/net.py): an
array the call changed in place is judged against the change it made, so that an SGD
update the kernels did not make cannot hide under the size of the parameters."""

import numpy as np

from grader.checks.net_training import REPLAY_TOL
from grader.worker.net import replay_difference


def test_an_update_the_kernels_did_not_make_is_caught_whatever_the_parameters_size():
    before = np.full(50, 100.0, np.float32)
    after = before - np.float32(1e-3) * np.linspace(-1, 1, 50, dtype=np.float32)
    # Replayed kernels that leave the parameters as they were: a thousandth of a unit off
    # parameters of size 100, 1e-5 of them, but the whole of the update.
    assert float(np.abs(after - before).max()) / 100 < 2 * REPLAY_TOL
    assert replay_difference(after, before, before) > 0.5
    assert replay_difference(after, after.copy(), before) == 0.0  # an exact replay


def test_outputs_made_fresh_are_judged_against_their_size():
    value = np.array([1.0, -2.0, 4.0], np.float32)
    again = value + np.float32(4e-7)
    assert replay_difference(value, again, None) <= REPLAY_TOL
    assert replay_difference(value, value * 0, None) == 1.0
    unchanged = value.copy()  # an input the call left alone, replayed as it was
    assert replay_difference(value, value.copy(), unchanged) == 0.0
    assert replay_difference(value, np.full(3, np.nan, np.float32), None) == np.inf
    assert replay_difference(np.zeros(0, np.float32), np.zeros(0, np.float32), None) == 0.0
