"""On a GPU: a submission whose kernels keep the GPU busy cannot slow another submission's
timed calls. Its jobs are frozen during the others' timing windows, but a kernel already
launched runs on; the timed worker's idle probe sees it and the grader lets the job end
before the window opens (grader/isolation/windows.py). The timed job's figures come back
in the profile (GRADER_PROFILE): windows given, and of those, how many had to wait for
the other jobs to end."""

import json
import shutil

import pytest

from tests.conftest import KIT_ROOT, run_kit

pytestmark = [pytest.mark.gpu, pytest.mark.gemm]

# A right result, after each thread has slept on the GPU for a while (SLEEPS ms): every
# launch holds the GPU for about that long. (A loop of arithmetic alone was compiled away.)
HOG_KERNEL = '''
@cuda.jit
def gemm_naive_kernel(A, B, C, alpha, beta):
    j, i = cuda.grid(2)
    M, N = C.shape
    for _ in range(SLEEPS):
        cuda.nanosleep(1_000_000)
    if i < M and j < N:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        if beta == 0:
            C[i, j] = alpha * acc
        else:
            C[i, j] = alpha * acc + beta * C[i, j]
'''


def _hog(folder, sleeps: int = 300):
    source = (KIT_ROOT / "solution" / "gemm_1_naive.py").read_text()
    start = source.index("@cuda.jit")
    end = source.index("def gemm_naive(")
    (folder / "gemm_1_naive.py").write_text(source[:start] + f"SLEEPS = {sleeps}\n\n\n"
                                            + HOG_KERNEL.lstrip() + "\n\n"
                                            + source[end:])


def test_a_busy_gpu_does_not_slow_another_submissions_timing(tmp_path):
    subs = tmp_path / "subs"
    for name in ("solution_a", "solution_b", "hog"):
        shutil.copytree(KIT_ROOT / "solution", subs / name)
    _hog(subs / "hog")
    profile = tmp_path / "profile.jsonl"
    result = run_kit("grader", *(str(p) for p in sorted(subs.iterdir())), "--parts", "gemm",
                     "--kernels", "naive,shared", "--jobs-per-gpu", "6",
                     "--out", str(tmp_path / "out"), env={"GRADER_PROFILE": str(profile)})
    assert result.returncode == 0, result.stderr[-3000:]
    reports = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json")}
    for name in ("solution_a", "solution_b"):
        items = {i["id"]: i for i in reports[name]["items"]}
        for kernel in ("naive", "shared"):
            item = items[f"gemm.{kernel}.performance"]
            ratio = item["figures"]["time_over_solution"]
            # The band measured for identical kernels on an idle GPU (README, issue 12).
            assert 0.8 < ratio < 1.25, (name, kernel, ratio, item["message"])
    hog = {i["id"]: (i["points"], i["message"][:200]) for i in reports["hog"]["items"]}
    print("hog:", hog)
    jobs = [json.loads(line) for line in profile.read_text().splitlines()]
    for job in jobs:
        print({k: job.get(k) for k in ("kind", "module", "total", "paused", "windows")})
    windows = [r["windows"] for r in jobs if r.get("windows")]
    hogged = [r["total"] for r in jobs if r.get("module") == "gemm_1_naive"]
    assert max(hogged) > 10, "the hog never held the GPU: the test proves nothing"
    assert windows, "no timed job asked for a window (cgroup v2 and root needed)"


# At import: hold all but about 1 GiB of the GPU's memory for a while, then behave.
MEMORY_HOG = '''
import time

from nnkit.backend import cuda as _cuda

_held = _cuda.device_array(HOLD_FLOATS, dtype=np.float32)
time.sleep(20)
'''


def test_a_job_that_holds_the_gpus_memory_does_not_cost_another_its_points(tmp_path):
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    hold = max(free - (1 << 30), 0) // 4
    subs = tmp_path / "subs"
    for name in ("solution_a", "memory_hog"):
        shutil.copytree(KIT_ROOT / "solution", subs / name)
    hog = subs / "memory_hog" / "gemm_1_naive.py"
    source = hog.read_text()
    start = source.index("# Threads per block")
    hog.write_text(source[:start] + MEMORY_HOG.replace("HOLD_FLOATS", str(hold)).lstrip()
                   + "\n\n" + source[start:])
    result = run_kit("grader", str(subs / "memory_hog"), str(subs / "solution_a"),
                     "--parts", "gemm", "--kernels", "naive,shared", "--jobs-per-gpu", "4",
                     "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    print(result.stderr[-3000:])
    report = json.loads((tmp_path / "out" / "solution_a.json").read_text())
    for item in report["items"]:
        assert item["points"] == item["max_points"], (item["id"], item["message"])
