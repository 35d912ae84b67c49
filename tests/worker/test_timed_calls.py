"""The worker's timed calls and the grader's checks of them, run in the simulator (which
times nothing: the checks run up to 'no GPU timings'): a launcher that keeps an earlier
call's product and rescales it is caught by the samples of C, the solution is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import KIT_ROOT, TESTS

SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from grader.cases.gemm import GemmCase, job_inputs
    from grader.checks.gemm import check_perf
    from grader.worker import gemm, launches, tamper
    from grader.worker.common import Context
    from grader.worker.jobs import GemmJob
    from grader.worker.window import Window
    from nnkit import timing
    from nnkit.backend import select
    from nnkit.submission import load_function

    select()
    submission, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    case = GemmCase(16, 8, 4, 2.0, 5.0, seed=900)
    recorder = launches.Recorder(submission, False)
    recorder.install()
    gemm.TIMED_SECONDS = float(sys.argv[3])
    job = GemmJob(repeats=20, warmup=2, perf_seed=77)  # the config's, as the cheat assumes
    clock = timing.capture()
    ctx = Context(job, out, submission, job_inputs([], [case], 42), recorder,
                  tamper.Snapshot((), ()), clock, False, {"window": Window(None, clock)})
    gemm.time_cases(ctx, load_function(submission, "gemm_1_naive", "gemm_naive"), [case])
    print(json.dumps(check_perf(case, out, 0, "", secret=42, perf_seed=77).message))
""")


def _timed(submission: Path, out: Path, budget: float = 1e9) -> str:
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(submission), str(out),
                           str(budget)],
                          cwd=KIT_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NNKIT_DEVICE": "sim"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # 23 simulated calls twice: some 14 s
def test_a_rescaled_product_is_caught_in_the_timed_calls(tmp_path):
    cheat = tmp_path / "cheat"
    cheat.mkdir()
    text = (TESTS / "cheats_speed" / "rescaled_cache" / "gemm_1_naive.py").read_text()
    benchmark = "BENCHMARK = ((800, 1000, 784), (800, 10, 1000), (2048, 2048, 2048))"
    assert benchmark in text
    # the cheat's benchmark shapes, made the small one this test times
    (cheat / "gemm_1_naive.py").write_text(text.replace(benchmark, "BENCHMARK = ((16, 8, 4),)"))
    message = _timed(cheat, tmp_path / "cheat-out")
    assert "timed call 2 of 22 computed a wrong C" in message, message
    assert _timed(KIT_ROOT / "solution", tmp_path / "solution-out") == "no GPU timings"


def test_time_calls_stops_at_its_budget_after_the_least_calls():
    from nnkit import timing

    calls = []

    def run() -> None:
        calls.append(1)
        time.sleep(0.02)

    got = timing.time_calls(run, repeats=20, warmup=1, budget=0.05)
    assert len(got.host) == 3 and len(calls) == 4  # 0.06 s >= 0.05 after 3 timed calls
    calls.clear()
    got = timing.time_calls(run, repeats=20, warmup=0, budget=0.0, least=5)
    assert len(got.host) == 5 and len(calls) == 5
    assert len(timing.time_calls(run, repeats=4, warmup=0).host) == 4  # no budget


def test_a_timing_cut_short_is_checked_as_a_whole_one(tmp_path):
    """The solution timed with no budget left after 3 calls: its samples, the extra
    call's factor and its replay still check (the grader counts the calls made)."""
    out = tmp_path / "solution-out"
    assert _timed(KIT_ROOT / "solution", out, budget=0.0) == "no GPU timings"
    samples = np.load(out / "perf-0.npz")["samples"]
    assert samples.shape[0] == 2 + 3  # warm-up calls, then the least timed calls
