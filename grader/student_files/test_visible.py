"""Quick visible checks of every function you write (`make test`).

Each test loads your function from starter/ (or from the folder in $NNKIT_IMPL) and runs
nnkit.checks on a few small cases. Passing them is a first step: `make check` runs the
grader's full set, with tighter bounds and the race and index checker.
"""

import os
from pathlib import Path

import pytest

from nnkit.checks import MODULES, VISIBLE, check
from nnkit.submission import load_function

IMPL = Path(os.environ.get("NNKIT_IMPL", Path(__file__).resolve().parents[1] / "starter"))


@pytest.mark.parametrize("function", sorted(VISIBLE))
def test_visible_checks(function):
    check(function, load_function(IMPL, MODULES[function], function))
