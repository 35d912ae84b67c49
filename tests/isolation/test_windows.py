"""Timing windows (grader/isolation/windows.py, gpus.Gate, grader/worker/window.py): a timed
job gets its GPU alone around its timed calls only; the other jobs there are frozen and
their time limits stretched, or waited for when they cannot be frozen. Frozen cgroups
need cgroup v2 (a GPU machine's); here they are stood in for by objects that say so."""

import os
import subprocess
import sys
import threading
import time

import pytest

from grader.isolation import gpus, runner, windows
from grader.worker import window as worker_window
from grader.worker.jobs import GemmJob, MpiJob
from nnkit.timing import capture


class FakeCgroup:
    def __init__(self, can: bool = True) -> None:
        self.can, self.on, self.calls = can, False, []

    def freeze(self, on: bool) -> bool:
        self.calls.append(on)
        if self.can:
            self.on = on
        return self.can

    def frozen(self) -> bool:
        return self.on


def _started(gate: gpus.Gate, count: int) -> list[gpus.RunningJob]:
    """`count` jobs with freezable stand-in cgroups, started on `gate`."""
    jobs = [gpus.RunningJob(FakeCgroup()) for _ in range(count)]
    for job in jobs:
        gate.start(job)
    return jobs


def _in_thread(fn, *args) -> threading.Thread:
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def test_a_window_freezes_the_other_jobs_and_thaws_them_after():
    gate = gpus.Gate(4)
    me, other = _started(gate, 2)
    gate.open_window(me)
    assert other.cgroup.on and not me.cgroup.calls  # the timed job itself runs on
    time.sleep(0.05)
    assert other.paused_now() >= 0.05  # its limit stretches while it is frozen
    gate.close_window()
    assert not other.cgroup.on and other.frozen_at is None
    assert other.paused >= 0.05


def test_no_job_starts_while_a_window_is_open():
    gate = gpus.Gate(4)
    me = gpus.RunningJob(FakeCgroup())
    gate.start(me)
    gate.open_window(me)
    late = gpus.RunningJob(FakeCgroup())
    t = _in_thread(gate.start, late)
    time.sleep(0.1)
    assert t.is_alive() and late not in gate.running
    gate.close_window()
    t.join(2)
    assert late in gate.running


def test_a_job_that_cannot_be_frozen_is_waited_for():
    gate = gpus.Gate(4)
    me, stuck = gpus.RunningJob(FakeCgroup()), gpus.RunningJob(FakeCgroup(can=False))
    frozen = gpus.RunningJob(FakeCgroup())
    for job in (me, stuck, frozen):
        gate.start(job)
    opened = threading.Event()
    t = _in_thread(lambda: (gate.open_window(me), opened.set()))
    time.sleep(0.1)
    assert not opened.is_set()  # the GPU is not this job's while `stuck` runs
    assert not frozen.cgroup.on  # and the others were let go on to their end
    gate.end(stuck)
    time.sleep(0.05)
    assert not opened.is_set()
    gate.end(frozen)
    t.join(2)
    assert opened.is_set()
    gate.close_window()


def test_a_window_and_a_whole_job_alone_exclude_each_other():
    gate = gpus.Gate(2)
    me = gpus.RunningJob(FakeCgroup())
    gate.start(me)
    gate.open_window(me)
    got = threading.Event()
    t = _in_thread(lambda: (gate.acquire_exclusive(), got.set()))
    time.sleep(0.1)
    assert not got.is_set()
    gate.close_window()
    t.join(2)
    assert got.is_set()
    gate.release_exclusive()


class FakeWorker:
    """The worker's end of the pipes, driven by the test."""

    def __init__(self, server: windows.WindowServer) -> None:
        self.grants, self.asks = server.child_fds
        self.grants, self.asks = os.dup(self.grants), os.dup(self.asks)

    def say(self, what: bytes, reply: bool = True) -> bytes:
        os.write(self.asks, what)
        return os.read(self.grants, 1) if reply else b""

    def leave(self) -> None:
        os.close(self.grants)
        os.close(self.asks)


def _serving(gate: gpus.Gate, job: gpus.RunningJob, count: int = 1):
    """A window server for `job`, started, and the worker's end of its pipes."""
    server = windows.WindowServer(gate, job, count)
    worker = FakeWorker(server)
    server.start()
    return server, worker


def _served(count: int):
    gate = gpus.Gate(4)
    me, other = gpus.RunningJob(FakeCgroup()), gpus.RunningJob(FakeCgroup())
    gate.start(me)
    gate.start(other)
    server = windows.WindowServer(gate, me, count)
    worker = FakeWorker(server)
    server.start()
    return gate, other, server, worker


def test_the_server_grants_windows_and_no_more_than_its_count():
    gate, other, server, worker = _served(2)
    assert worker.say(windows.ASK) == windows.GRANT
    assert other.cgroup.on
    worker.say(windows.DONE, reply=False)
    assert worker.say(windows.ASK) == windows.GRANT
    worker.say(windows.DONE, reply=False)
    assert worker.say(windows.ASK) == b""  # a third: the grader has closed its end
    time.sleep(0.05)
    assert not other.cgroup.on and not gate.window
    worker.leave()
    server.close()
    assert server.opened == 2


def test_a_busy_gpu_makes_the_others_end_first():
    gate, other, server, worker = _served(1)
    assert worker.say(windows.ASK) == windows.GRANT
    os.write(worker.asks, windows.BUSY)
    time.sleep(0.1)
    assert not other.cgroup.on  # let go on, to its end
    gate.end(other)
    assert os.read(worker.grants, 1) == windows.GRANT
    worker.say(windows.DONE, reply=False)
    worker.leave()
    server.close()
    assert server.drained == 1 and not gate.window


def test_a_window_held_too_long_is_closed(monkeypatch):
    monkeypatch.setattr(windows, "WINDOW_SECONDS", 0.2)
    gate, other, server, worker = _served(3)
    assert worker.say(windows.ASK) == windows.GRANT
    time.sleep(0.5)
    assert not other.cgroup.on and not gate.window
    worker.say(windows.DONE, reply=False)  # late: the window was closed already
    assert worker.say(windows.ASK) == windows.GRANT  # the job's next window is served
    assert other.cgroup.on
    worker.say(windows.DONE, reply=False)
    worker.leave()
    server.close()
    assert server.opened == 2 and not gate.window


def test_a_worker_that_dies_in_its_window_closes_it():
    gate, other, server, worker = _served(2)
    assert worker.say(windows.ASK) == windows.GRANT
    worker.leave()
    server.close()  # returns: the server saw the end of its pipe
    assert not other.cgroup.on and not gate.window


def test_the_worker_side_asks_checks_and_says_done(monkeypatch):
    gate, other, server, worker = _served(2)
    monkeypatch.setattr(worker_window, "probe_array", lambda: None)
    probes = []
    monkeypatch.setattr(worker_window, "gpu_idle",  # busy once, then probed again
                        lambda clock, x, wait=1.0: probes.append(wait) and False)
    monkeypatch.setattr(worker_window, "spin_up", lambda: None)
    job_window = worker_window.Window([worker.grants, worker.asks], capture())
    drained = []

    def end_other_soon():
        time.sleep(0.1)
        drained.append(other.cgroup.on)
        gate.end(other)

    t = _in_thread(end_other_soon)
    with job_window.alone():
        assert gate.window and server.drained == 1
    t.join(2)
    assert drained == [False]
    assert probes == [worker_window.IDLE_WAIT, worker_window.DRAINED_WAIT]
    time.sleep(0.05)
    assert not gate.window
    worker.leave()
    server.close()


def test_a_drained_window_does_not_wait_for_a_job_asking_for_its_own():
    """Two timed jobs: the first's GPU is busy (drain), the second asks for a window
    meanwhile. The second cannot end before its window, which waits for the first's: it
    is frozen where it waits instead of waited for (seen on an H100, where both hung to
    their time limits and, no job starting while a window is open, the run with them)."""
    gate = gpus.Gate(4)
    first, second = gpus.RunningJob(FakeCgroup()), gpus.RunningJob(FakeCgroup())
    plain = gpus.RunningJob(FakeCgroup())
    for job in (first, second, plain):
        gate.start(job)
    gate.open_window(first)
    gate.close_window()
    opened = threading.Event()
    t = _in_thread(lambda: (gate.open_window(first, drain=True), opened.set()))
    time.sleep(0.05)
    asker = _in_thread(gate.open_window, second)
    time.sleep(0.1)
    assert not opened.is_set()  # `plain` runs on to its end
    gate.end(plain)
    t.join(2)
    assert opened.is_set() and second.cgroup.on  # frozen where it waits
    gate.close_window()
    asker.join(2)  # then its own window opens
    assert not asker.is_alive() and gate.window and first.cgroup.on  # first, frozen now
    assert second.paused > 0 and not second.cgroup.on
    gate.close_window()


def test_no_window_means_the_block_just_runs(monkeypatch):
    spun = []
    monkeypatch.setattr(worker_window, "spin_up", lambda: spun.append(1))
    with worker_window.Window(None, capture()).alone():
        pass
    assert spun == [1]


def test_a_refused_window_is_an_error_of_the_timed_calls(monkeypatch):
    gate, other, server, worker = _served(0)  # no window at all
    monkeypatch.setattr(worker_window, "spin_up", lambda: None)
    monkeypatch.setattr(worker_window, "probe_array", lambda: None)
    with pytest.raises(worker_window.NoWindow):
        with worker_window.Window([worker.grants, worker.asks], capture()).alone():
            pass
    worker.leave()
    server.close()


def test_time_spent_frozen_does_not_count_against_the_limit():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    job = gpus.RunningJob(None, paused=1.5)
    assert runner.wait_for(proc, 1.0, job)  # 1.5 s of work, 1 s limit, 1.5 s frozen
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    assert not runner.wait_for(proc, 0.5, gpus.RunningJob(None))
    proc.kill()
    proc.wait()


def _run(tmp_path, tail: str = "", errors: dict | None = None, timed_out: bool = False,
         frozen: bool = False) -> runner.WorkerRun:
    out = tmp_path / "results"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (errors or {}).items():
        (out / name).write_text(text)
    return runner.WorkerRun(out, 1, timed_out, tail, None, 1.0, frozen)


def test_running_out_of_gpu_memory_is_recognised(tmp_path):
    cupy = "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 4,096 bytes"
    numba = ("CudaAPIError: [2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")
    assert runner.out_of_gpu_memory(_run(tmp_path / "a", tail=cupy))
    assert runner.out_of_gpu_memory(_run(tmp_path / "b", errors={"case-3.err": numba}))
    assert not runner.out_of_gpu_memory(_run(tmp_path / "c", tail="MemoryError",
                                              errors={"case-0.err": "IndexError"}))
    linked = _run(tmp_path / "d")
    (tmp_path / "d" / "elsewhere.txt").write_text(cupy)
    (linked.outdir / "case-0.err").symlink_to(tmp_path / "d" / "elsewhere.txt")
    assert not runner.out_of_gpu_memory(linked)  # a link is not read


def test_a_job_out_of_gpu_memory_beside_others_runs_again_alone(tmp_path, monkeypatch):
    """From its folder as it was before the first run (which may have changed its copy),
    its paths moved there, with the GPU to itself."""
    workdir = tmp_path / "gemm-naive"
    (workdir / "submission").mkdir(parents=True)
    (workdir / "submission" / "gemm_1_naive.py").write_text("honest = True\n")
    (workdir / "rank-1").mkdir()
    (workdir / "rank-1" / "inputs.npz").write_text("read once, then removed")
    calls, alone = [], []

    def attempt(job, where, *args):
        calls.append((job, where))
        if len(calls) == 1:
            (where / "submission" / "gemm_1_naive.py").write_text("honest = False\n")
            (where / "rank-1" / "inputs.npz").unlink()
            return _run(tmp_path / "first", tail="CUDA_ERROR_OUT_OF_MEMORY")
        return _run(tmp_path / "second")

    monkeypatch.setattr(runner, "_attempt", attempt)
    monkeypatch.setattr(gpus, "current_gate", lambda: gpus.Gate(4))
    monkeypatch.setattr(gpus, "exclusive", lambda: _Alone(alone))
    job = MpiJob(kind="ring", submission=str(workdir.resolve() / "submission"),
                 ranks_dir="/elsewhere/ranks")
    run = runner.run_worker(job, workdir, 10, on_gpu=True)
    assert run.outdir == tmp_path / "second" / "results"
    assert len(calls) == 2 and alone == ["in", "out"]
    job2, where2 = calls[1]
    assert where2 == workdir.resolve().with_name("gemm-naive-alone")
    assert job2.submission == str(where2 / "submission")
    assert job2.ranks_dir == "/elsewhere/ranks"  # a path outside the folder: as it was
    assert (where2 / "submission" / "gemm_1_naive.py").read_text() == "honest = True\n"
    assert (where2 / "rank-1" / "inputs.npz").exists()
    assert not workdir.resolve().with_name("gemm-naive-aside").exists()


@pytest.mark.parametrize(("frozen", "runs"), [(True, 2), (False, 1)])
def test_a_job_past_its_limit_after_a_freeze_runs_again_alone(tmp_path, monkeypatch,
                                                               frozen, runs):
    """A job frozen for another's timing window that then ran past its limit gets a run
    with the GPU to itself; one never frozen that ran past it does not."""
    calls, alone = [], []
    monkeypatch.setattr(runner, "_attempt", lambda *a: calls.append(a) or _run(
        tmp_path / f"r{len(calls)}", timed_out=True, frozen=frozen and len(calls) == 1))
    monkeypatch.setattr(gpus, "current_gate", lambda: gpus.Gate(4))
    monkeypatch.setattr(gpus, "exclusive", lambda: _Alone(alone))
    run = runner.run_worker(GemmJob(), tmp_path / "w", 10, on_gpu=True)
    assert len(calls) == runs and run.timed_out
    assert alone == (["in", "out"] if frozen else [])


def test_a_drained_window_stops_a_job_still_running_at_its_bound(monkeypatch):
    """A job still running DRAIN_SECONDS into a drained window is stopped (displaced: its
    runner runs it again alone); one that cannot be stopped yet is frozen."""
    monkeypatch.setattr(gpus, "DRAIN_SECONDS", 0.2)
    gate = gpus.Gate(4)
    me, hung = gpus.RunningJob(FakeCgroup()), gpus.RunningJob(FakeCgroup())
    starting = gpus.RunningJob(FakeCgroup())  # no process to stop yet
    for job in (me, hung, starting):
        gate.start(job)
    hung.stop = lambda: gate.end(hung)  # its processes killed: its runner ends it
    started = time.monotonic()
    gate.open_window(me, drain=True)
    assert time.monotonic() - started >= 0.2
    assert hung.displaced and hung not in gate.running and not hung.cgroup.calls
    assert starting.cgroup.on and starting.freezes == 1 and not starting.displaced
    assert not me.freezes and not me.displaced
    gate.close_window()
    assert not starting.cgroup.on and starting.paused > 0


def test_a_gpu_still_busy_once_drained_stops_every_other_job():
    """The worker says BUSY twice: once drained (here, the other job only waits for its
    own window: frozen), the second time the grader stops the others before it grants."""
    gate, other, server, worker = _served(1)
    other.asking = True  # as while its own server waits for this window to close
    other.stop = lambda: gate.end(other)
    assert worker.say(windows.ASK) == windows.GRANT
    assert worker.say(windows.BUSY) == windows.GRANT
    assert other.cgroup.on and not other.displaced  # frozen where it waits
    assert worker.say(windows.BUSY) == windows.GRANT
    assert other.displaced and other not in gate.running
    worker.say(windows.DONE, reply=False)
    worker.leave()
    server.close()
    assert server.drained == 1 and not gate.window and server.me.stops_used


def test_only_one_window_of_a_job_stops_the_others(monkeypatch):
    """The bytes are the submission's to write: each stopped job runs again, so a job
    stops the others once at most."""
    monkeypatch.setattr(gpus, "DRAIN_SECONDS", 0.2)
    gate, other, server, worker = _served(2)
    other.asking = True
    stops = []
    other.stop = lambda: stops.append(1)  # (its runner would end it; here it stays)
    for _ in range(2):
        assert worker.say(windows.ASK) == windows.GRANT
        assert worker.say(windows.BUSY) == windows.GRANT
        assert worker.say(windows.BUSY) == windows.GRANT
        worker.say(windows.DONE, reply=False)
    assert stops == [1]
    assert server.me.disturbed  # its second window met a GPU it could not clear: rerun
    worker.leave()
    server.close()


def test_a_displaced_job_runs_again_alone(tmp_path, monkeypatch):
    calls, alone = [], []

    def attempt(*args):
        calls.append(args)
        run = _run(tmp_path / f"r{len(calls)}")
        run.displaced = len(calls) == 1
        return run

    monkeypatch.setattr(runner, "_attempt", attempt)
    monkeypatch.setattr(gpus, "current_gate", lambda: gpus.Gate(4))
    monkeypatch.setattr(gpus, "exclusive", lambda: _Alone(alone))
    runner.run_worker(GemmJob(), tmp_path / "w", 10, on_gpu=True)
    assert len(calls) == 2 and alone == []  # once more beside the others
    calls.clear()
    monkeypatch.setattr(runner, "_attempt", lambda *a: calls.append(a) or _displaced(
        tmp_path / f"s{len(calls)}", len(calls) <= 2))
    runner.run_worker(GemmJob(), tmp_path / "w2", 10, on_gpu=True)
    assert len(calls) == 3 and alone == ["in", "out"]  # stopped twice: then alone


def _displaced(where, displaced: bool) -> runner.WorkerRun:
    run = _run(where)
    run.displaced = displaced
    return run


def test_a_job_out_of_memory_alone_is_not_run_again(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(runner, "_attempt", lambda *a: calls.append(a) or _run(
        tmp_path / "r", tail="Out of memory allocating"))
    monkeypatch.setattr(gpus, "current_gate", lambda: None)  # the GPU is the job's alone
    runner.run_worker(GemmJob(), tmp_path / "w", 10, on_gpu=True)
    assert len(calls) == 1


class _Alone:
    def __init__(self, log: list) -> None:
        self.log = log

    def __enter__(self):
        self.log.append("in")

    def __exit__(self, *exc):
        self.log.append("out")


# Found by a review of the windows' stopping and crediting (each failed before its fix).

def test_a_hostile_asker_keeps_the_gpu_busy_through_a_later_window(monkeypatch):
    """T has 2 windows. Its first spent the 'stop the others' budget (H, busy, was stopped).
    H runs again beside the others (rerun=True), queues long kernels and asks for a window
    of its own: frozen, not stopped, its kernels still running. T's second window: B, B,
    and the grader grants with H still there, its kernels on the GPU: T is timed on a busy
    GPU, nothing records it."""
    monkeypatch.setattr(gpus, "DRAIN_SECONDS", 0.2)
    gate, h, server, worker = _served(2)
    h.stop = lambda: gate.end(h)
    assert worker.say(windows.ASK) == windows.GRANT
    h.asking = True
    assert worker.say(windows.BUSY) == windows.GRANT
    assert worker.say(windows.BUSY) == windows.GRANT
    assert h.displaced
    worker.say(windows.DONE, reply=False)
    time.sleep(0.05)
    (h2,) = _started(gate, 1)  # H's rerun, beside the others
    h2.stop = lambda: gate.end(h2)
    h2_server, h2_worker = _serving(gate, h2)
    assert worker.say(windows.ASK) == windows.GRANT
    os.write(h2_worker.asks, windows.ASK)  # H asks (thawed during the drain, or before)
    time.sleep(0.05)
    assert worker.say(windows.BUSY) == windows.GRANT  # drained: H asking -> frozen
    assert worker.say(windows.BUSY) == windows.GRANT  # still busy: H's kernels
    assert h2 not in gate.running or server.me.disturbed, \
        "granted with H's kernels still on the GPU, T's timing unmarked"
    worker.say(windows.DONE, reply=False)
    worker.leave()
    server.close()


def test_a_window_is_not_opened_for_a_job_that_has_ended(monkeypatch):
    """An asker stopped or timed out while its server waits in open_window gets no
    window once the owner's closes (before the fix, every other job was frozen for it,
    and one that would not freeze was drained and then stopped, all for nobody)."""
    monkeypatch.setattr(gpus, "DRAIN_SECONDS", 0.2)
    monkeypatch.setattr(gpus, "FREEZE_WAIT", 0.1)
    gate = gpus.Gate(4)
    owner, asker, plain = _started(gate, 3)
    plain.stop = lambda: gate.end(plain)
    gate.open_window(owner)
    t = _in_thread(gate.open_window, asker)
    time.sleep(0.05)
    gate.end(asker)  # killed (displace_others, or its limit) while its server waits
    gate.close_window()
    plain.cgroup.can = False  # from now on its processes do not stop (say, in a driver call)
    t.join(2)
    assert not plain.displaced, "displaced for a window of a job that had ended"
    assert not gate.window, "a window open for a job that ended"


def test_a_job_that_finished_is_not_displaced():
    """Marked displaced by a window just as it exited by itself: its results are kept."""
    me = gpus.RunningJob(FakeCgroup())
    me.displaced = True
    assert not runner.displaced(me, 0)
    assert runner.displaced(me, -9) and not runner.displaced(gpus.RunningJob(None), -9)


def test_an_asker_waiting_out_a_drain_is_not_charged_for_it(monkeypatch):
    """A timed job's limit is stretched by the time it waits for its window, while it
    waits: through another job's drain too (before the fix it was neither frozen nor
    credited there, and ran out of time, with no rerun)."""
    monkeypatch.setattr(gpus, "DRAIN_SECONDS", 0.6)
    gate = gpus.Gate(4)
    owner, plain, asker = _started(gate, 3)
    plain.stop = lambda: gate.end(plain)
    _in_thread(gate.open_window, owner, True)  # a drain: plain runs on for 0.6 s
    time.sleep(0.05)
    server = windows.WindowServer(gate, asker, 1)
    worker = FakeWorker(server)
    server.start()
    os.write(worker.asks, windows.ASK)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    ok = runner.wait_for(proc, 0.3, asker)  # 0.3 s limit left, blocked on the grant
    proc.kill()
    proc.wait()
    assert ok or asker.freezes, "timed out waiting for its window, never frozen: no rerun"


def test_an_asker_frozen_while_it_waits_is_credited_once():
    """Frozen for another job's window while it waits for its own: the wait counts once
    against its limit (it counted twice before the fix)."""
    gate = gpus.Gate(4)
    owner, asker = _started(gate, 2)
    gate.open_window(owner)
    server = windows.WindowServer(gate, asker, 1)
    worker = FakeWorker(server)
    server.start()
    os.write(worker.asks, windows.ASK)
    time.sleep(0.5)
    gate.close_window()
    assert os.read(worker.grants, 1) == windows.GRANT
    assert asker.paused < 0.75, f"0.5 s of waiting credited as {asker.paused:.2f} s"
    worker.say(windows.DONE, reply=False)
    worker.leave()
    server.close()


def test_a_job_stops_the_others_once_at_most_even_with_single_busies(monkeypatch):
    """A first BUSY in each window drains, and a job still running DRAIN_SECONDS later
    is stopped: in one window of a job only (RunningJob.stops_used), like a second BUSY."""
    monkeypatch.setattr(gpus, "DRAIN_SECONDS", 0.2)
    gate, other, server, worker = _served(3)
    stops = []
    other.stop = lambda: stops.append(1)  # a long training job (its runner would rerun it)
    for _ in range(3):
        assert worker.say(windows.ASK) == windows.GRANT
        assert worker.say(windows.BUSY) == windows.GRANT
        worker.say(windows.DONE, reply=False)
    assert len(stops) <= 1, f"stopped {len(stops)} times by one job's bytes"
    worker.leave()
    server.close()


# Found by a second review (each failed before its fix).

def test_an_ended_asker_does_not_close_another_jobs_window(monkeypatch):
    """me says B; while its server waits to reopen (drained), me is stopped (another
    window's displace_others); the window it waited for closes, and before its server's
    `finally: close_window()` runs, a third job's window opens (a thread switch, e.g. in
    _thaw's cgroup writes). That close ends w3's window: others thawed, new jobs start,
    a fourth window may freeze w3 in the middle of its timing."""
    gate = gpus.Gate(4)
    me, w3, other = _started(gate, 3)
    real = gate.open_window

    def open_window(job, drain=False):
        if job is me and drain:
            gate.end(me)  # stopped while it waited
            got = real(me, drain)
            assert not got
            real(w3)  # the interleaving: w3's window opens first
            return got
        return real(job, drain)

    monkeypatch.setattr(gate, "open_window", open_window)
    server = windows.WindowServer(gate, me, 1)
    worker = FakeWorker(server)
    server.start()
    assert worker.say(windows.ASK) == windows.GRANT
    worker.say(windows.BUSY, reply=False)
    time.sleep(0.2)
    assert gate.window and other.cgroup.on, "me's server closed w3's window"
    worker.leave()
    server.close()


class _Spy(gpus.RunningJob):
    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "waiting_since" and value is None and hasattr(self, "seen"):
            self.seen.append(self.paused_now())


def test_a_credited_wait_never_reads_as_uncredited(monkeypatch):
    """wait_for reads paused_now() from another thread: between `waiting_since = None`
    and `paused += ...` (windows.py _credited) the whole wait is missing from it."""
    monkeypatch.setattr(gpus, "DRAIN_SECONDS", 0.5)
    gate = gpus.Gate(4)
    me, other = _Spy(FakeCgroup()), gpus.RunningJob(FakeCgroup())
    me.seen = []
    gate.start(me)
    gate.start(other)
    other.stop = lambda: gate.end(other)
    server, worker = _serving(gate, me)
    assert worker.say(windows.ASK) == windows.GRANT
    assert worker.say(windows.BUSY) == windows.GRANT  # a drain: 0.5 s waited, not frozen
    worker.say(windows.DONE, reply=False)
    worker.leave()
    server.close()
    assert me.paused >= 0.45
    assert me.seen[-1] >= 0.45, f"paused_now() read {me.seen[-1]:.2f} s mid-credit"
