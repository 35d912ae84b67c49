"""The worker's timed calls and the grader's checks of them, run in the simulator (which
times nothing: the checks run up to 'no GPU timings'): a launcher that keeps an earlier
call's product and rescales it is caught by the samples of C, the solution is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
    job = GemmJob(repeats=20, warmup=2, perf_seed=77)  # the config's, as the cheat assumes
    clock = timing.capture()
    ctx = Context(job, out, submission, job_inputs([], [case], 42), recorder,
                  tamper.Snapshot((), ()), clock, False, {"window": Window(None, clock)})
    gemm.time_cases(ctx, load_function(submission, "gemm_1_naive", "gemm_naive"), [case])
    print(json.dumps(check_perf(case, out, 0, "", secret=42, perf_seed=77).message))
""")


def _timed(submission: Path, out: Path) -> str:
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(submission), str(out)],
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
