import os
import subprocess
import sys

import pytest

from nnkit.backend import probe_gpu
from tests.conftest import KIT_ROOT, run_kit


def test_bad_choice_is_a_clear_error():
    result = run_kit("nnkit", "info", env={"NNKIT_DEVICE": "tpu"})
    assert result.returncode == 2 and "expected auto, gpu or sim" in result.stderr
    assert "Traceback" not in result.stderr


def test_simulator_on_request():
    result = run_kit("nnkit", "info", env={"NNKIT_DEVICE": "sim"})
    assert result.returncode == 0 and "CUDA simulator" in result.stdout


def test_insisting_on_a_gpu_without_one_fails_clearly():
    usable, _ = probe_gpu()
    result = run_kit("nnkit", "info", env={"NNKIT_DEVICE": "gpu"})
    if usable:
        assert result.returncode == 0 and "GPU (" in result.stdout
    else:
        assert result.returncode == 2 and "NNKIT_DEVICE=gpu, but" in result.stderr


def test_numba_imported_first_in_the_other_mode_is_detected():
    code = ("import os; os.environ['NUMBA_ENABLE_CUDASIM'] = '0'; import numba.cuda; "
            "os.environ['NNKIT_DEVICE'] = 'sim'; from nnkit.backend import cuda")
    bad = subprocess.run([sys.executable, "-c", code], cwd=KIT_ROOT, capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "import kernels' `cuda` from nnkit.backend" in bad.stderr


def test_gpu_only_jit_keywords_are_accepted_in_the_simulator():
    """@cuda.jit(lineinfo=True, max_registers=32) is correct GPU code; numba's simulator
    rejected the keywords, so a student's module failed to load with no GPU."""
    code = ("import numpy as np; from nnkit.backend import cuda\n"
            "@cuda.jit(lineinfo=True, max_registers=32, fastmath=True)\n"
            "def twice(a):\n    i = cuda.grid(1)\n    if i < a.size:\n        a[i] = 2 * i\n"
            "@cuda.jit(device=True, forceinline=True, launch_bounds=64)\n"
            "def one(x):\n    return x + 1\n"
            "a = np.zeros(4, np.float32); twice[1, 4](a); print(a.tolist())")
    result = subprocess.run([sys.executable, "-c", code], cwd=KIT_ROOT, capture_output=True,
                            text=True, env={**os.environ, "NNKIT_DEVICE": "sim"})
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout.strip() == "[0.0, 2.0, 4.0, 6.0]"


def _sync_setting(env: dict[str, str]) -> str:
    code = ("from nnkit.backend import cuda; from numba.cuda.core import config; "
            "print(int(config.CUDA_ARRAY_INTERFACE_SYNC))")
    result = subprocess.run([sys.executable, "-c", code], cwd=KIT_ROOT, capture_output=True,
                            text=True, env={**os.environ, "NNKIT_DEVICE": "sim", **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_launches_on_cupy_arrays_do_not_wait_for_the_gpu_unless_asked(monkeypatch):
    monkeypatch.delenv("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", raising=False)
    assert _sync_setting({}) == "0"
    assert _sync_setting({"NUMBA_CUDA_ARRAY_INTERFACE_SYNC": "1"}) == "1"


@pytest.mark.gpu
def test_a_launch_on_cupy_arrays_returns_before_the_gpu_is_done():
    import cupy

    from nnkit.backend import cuda, select

    assert select().on_gpu

    @cuda.jit
    def spin(out, rounds):
        acc = out[0]
        for i in range(rounds):
            acc = acc * 0.999999 + 1e-7 * i
        out[0] = acc

    out, busy = cupy.zeros(1, cupy.float32), cupy.zeros(1, cupy.float32)
    spin[1, 1](out, 10)
    cupy.cuda.Device().synchronize()
    spin[1, 1](busy, 200_000_000)  # seconds of work on one thread
    spin[1, 1](out, 10)  # with per-argument stream syncs, this waits for the one above
    assert not cupy.cuda.Stream.null.done
    cupy.cuda.Device().synchronize()
