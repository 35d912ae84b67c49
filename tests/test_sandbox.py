"""The sandbox's parts (grader/sandbox.py, grader/anticheat.py), timed calls that must see
fresh operands and a true clock, and grading that gives the same verdicts twice."""

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from grader import anticheat, sandbox
from grader.cases import GemmCase
from grader.gemm_checks import check_perf
from grader.runner import copy_submission, run_worker
from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config
from tests.conftest import KIT_ROOT, run_kit

CHEATS = Path(__file__).parent / "cheats"


def test_results_are_copied_as_plain_files_only(tmp_path):
    out, dest = tmp_path / "out", tmp_path / "dest"
    out.mkdir()
    dest.mkdir()
    (out / "case-0.npz").write_bytes(b"data")
    (out / "case-1.err").symlink_to(KIT_ROOT / "solution" / "gemm_1_naive.py")
    os.mkfifo(out / "case-2.err")  # reading it would block the grader
    (out / "huge.npz").write_bytes(b"x" * 2000)
    (out / "sub").mkdir()
    sandbox.collect_files(out, dest, max_bytes=1000)
    assert sorted(p.name for p in dest.iterdir()) == ["case-0.npz"]


def test_a_symlink_in_a_submission_is_not_copied(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "gemm_1_naive.py").symlink_to(KIT_ROOT / "solution" / "gemm_1_naive.py")
    copy = copy_submission(sub, tmp_path / "copy")
    # neither read through nor copied as a link (grader/submissions.py lists it in a note)
    assert list(copy.iterdir()) == []


def test_sandbox_settings_are_checked(tmp_path):
    config = tmp_path / "config.toml"
    for old, new in [('mode = "auto"', 'mode = "maybe"'),
                     ("processes = 2048", "processes = -1"),
                     ("uid_first = 64000", "uid_first = 0"),
                     ("network = false", "network = false\nmystery = 1")]:
        text = DEFAULT_CONFIG.read_text()
        assert old in text
        config.write_text(text.replace(old, new))
        with pytest.raises(ConfigError, match="sandbox"):
            load_config(config)
    load_config()
    assert sandbox.current() == sandbox.Settings()  # the file's values are the defaults


def test_the_worker_gets_its_modules_and_no_other(tmp_path):
    modules = sandbox.worker_modules()
    assert {"worker", "cases", "anticheat", "simcheck", "worker_net"} <= set(modules)
    assert not {"part1", "gemm_checks", "net_checks", "scoring", "sandbox"} & set(modules)
    kit = sandbox.staged_kit()
    assert (kit / "nnkit" / "backend.py").is_file() and not (kit / "solution").exists()
    assert sorted(p.stem for p in (kit / "grader").glob("*.py")) == ["__init__", *modules]


def test_the_static_scan_finds_products_and_spares_the_rest(tmp_path):
    (tmp_path / "gemm_1_naive.py").write_text(textwrap.dedent("""
        import numpy as np
        from .helpers import combine
        dot = 0.0  # a variable called dot is fine
        def gemm_naive(A, B, C, alpha, beta):
            combine(A, B)
        if __name__ == "__main__":
            print(np.dot(1, 2))  # a self-check, not graded
    """))
    (tmp_path / "helpers.py").write_text("import cupy.cublas\n"
                                        "def combine(a, b):\n    return a @ b\n")
    found = {f.describe() for f in anticheat.scan(tmp_path, "gemm_1_naive")}
    assert found == {"import cupy.cublas (helpers.py, line 1)",
                     "the @ operator (helpers.py, line 3)"}
    assert anticheat.scan(KIT_ROOT / "solution", "gemm_3_register") == []


def _perf_job(tmp_path, source: str) -> tuple[GemmCase, object]:
    sub = tmp_path / "sub"
    sub.mkdir(parents=True)
    (sub / "gemm_1_naive.py").write_text(source)
    case = GemmCase(9, 7, 5, 2.0, 5.0, seed=900)
    workdir = tmp_path / "job"
    copy = copy_submission(sub, workdir / "submission")
    job = {"submission": str(copy), "module": "gemm_1_naive", "function": "gemm_naive",
           "cases": [], "perf": [case.to_json()], "repeats": 3, "warmup": 1}
    return case, run_worker(job, workdir, 120, on_gpu=False)


def test_timed_calls_get_new_operands_and_a_true_clock(tmp_path):
    """The replaying cheat is caught on its second timed call; a kernel that replaces
    time.perf_counter when imported is still timed by the real clock."""
    replay = (CHEATS / "replay" / "gemm_1_naive.py").read_text()
    case, run = _perf_job(tmp_path / "replay", replay)
    outcome = check_perf(case, run.outdir, 0, "")
    assert outcome.seconds is None and "timed call 2 of 4 computed a wrong C" in outcome.message

    honest = (KIT_ROOT / "solution" / "gemm_1_naive.py").read_text()
    case, run = _perf_job(tmp_path / "clock", "import time\ntime.perf_counter = lambda: 1.0\n"
                          + honest)
    outcome = check_perf(case, run.outdir, 0, "")
    assert outcome.message == "no GPU timings"  # every sample right; no GPU to time it on
    host = json.loads((run.outdir / "perf-0.json").read_text())["host"]
    assert len(host) == 3 and all(t > 1e-5 for t in host), host


def test_grading_twice_gives_the_same_correctness_verdicts(tmp_path):
    """Operands, seeds and checks are fixed: two runs agree on every point and message."""
    runs = []
    for n in range(2):
        out = tmp_path / f"run{n}"
        result = run_kit("grader", "solution", "starter", "--bugs",
                         str(KIT_ROOT / "tests" / "bugs" / "checker" / "gemm"),
                         "--parts", "gemm", "--kernels", "naive", "--jobs", "2",
                         "--out", str(out))
        assert result.returncode == 0, result.stderr[-2000:]
        runs.append({p.stem: [{k: i[k] for k in ("id", "points", "status", "message",
                                                  "checks")}
                              for i in json.loads(p.read_text())["items"]
                              if i["id"].endswith("correctness")]
                     for p in out.glob("*.json")})
    assert len(runs[0]) == 4 and runs[0] == runs[1]
    assert runs[0]["solution"][0]["points"] == 10 and runs[0]["starter"][0]["points"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid locks are root's")
def test_uids_are_shared_out_across_grading_processes():
    settings = sandbox.Settings(uid_first=64100, uid_count=2)
    first, lock = sandbox.acquire_uid(settings)
    try:  # another process (here: another descriptor) gets the next uid
        second, lock2 = sandbox.acquire_uid(settings)
        assert {first, second} == {64100, 64101}
        sandbox.release_uid(lock2)
    finally:
        sandbox.release_uid(lock)


def _machine_allows_namespaces() -> bool:
    """Asked of the system itself, not of the grader: as root, can a process get new
    mount, network and PID namespaces?"""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork", "true"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _machine_allows_namespaces(),
                    reason="needs root and namespaces (unshare --mount --net --pid)")
def test_jobs_are_confined_wherever_the_machine_allows_it(tmp_path):
    """A grader that silently falls back to unconfined workers (as it once did when the
    interpreter lived in the kit's own .venv) would leave every defence that relies on
    confinement untested."""
    result = run_kit("grader", "solution", "--parts", "gemm", "--kernels", "naive",
                     "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(s for s in result.stderr.splitlines() if s.startswith("sandbox:"))
    assert "run as uids" in line and "namespaces" in line, line
