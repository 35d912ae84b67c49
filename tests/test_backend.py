import subprocess
import sys

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
