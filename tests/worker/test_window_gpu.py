"""On a GPU: the timed worker's idle probe (grader/worker/window.py) sees a kernel that
another process launched and that still runs, though that process is stopped (as a job
frozen for a timing window is), and sees the GPU idle once it is done."""

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.gpu

# One thread that spins on the GPU's clock for `cycles`, launched by a process of its own.
SPIN = r'''
import sys
import cupy
kernel = cupy.RawKernel(r"""
extern "C" __global__ void spin(long long cycles, float* out) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    out[0] = 1.0f;
}""", "spin")
out = cupy.zeros(1, dtype=cupy.float32)
kernel((1,), (1,), (cupy.int64(int(sys.argv[1])), out))
print("launched", flush=True)
cupy.cuda.runtime.deviceSynchronize()
'''


def test_the_idle_probe_sees_a_stopped_processs_kernel_still_running():
    from grader.worker.window import gpu_idle, probe_array
    from nnkit.backend import select
    from nnkit.timing import capture

    select()
    clock = capture()
    x = probe_array()
    assert gpu_idle(clock, x)  # nothing else runs yet
    # About 4 s at the H100's 1.7-2 GHz.
    proc = subprocess.Popen([sys.executable, "-c", SPIN, str(8 * 10**9)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "launched"
        os.kill(proc.pid, signal.SIGSTOP)  # as a frozen job: its kernel runs on
        time.sleep(0.2)
        assert not gpu_idle(clock, x)
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(60) == 0
        assert gpu_idle(clock, x)
    finally:
        proc.kill()
        proc.wait()


def test_a_launch_bound_window_pins_the_thread_to_one_cpu_and_gives_its_cpus_back():
    from grader.worker.window import Window
    from nnkit.backend import select
    from nnkit.timing import capture

    select()
    before = os.sched_getaffinity(0)
    window = Window(None, capture())
    with window.alone(launch_bound=True):
        window.fastest_cpu()
        chosen = os.sched_getaffinity(0)
        assert len(chosen) == 1 and chosen <= before
        window.fastest_cpu()  # chosen again among all of them, not the one just chosen
        assert os.sched_getaffinity(0) <= before
    assert os.sched_getaffinity(0) == before
    with window.alone():  # not launch-bound: nothing moves
        window.fastest_cpu()
        assert os.sched_getaffinity(0) == before
