"""One GPU per grading worker: the pool, the ids, and what a task sees while it runs."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from grader.isolation import gpus
from grader.parts import gemm as gemm_part
from grader.pipeline import Task, gemm_references, grade_kernel, safely
from grader.scoring import load_config


def test_ids_follow_the_graders_own_cuda_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.visible_ids(3) == ["0", "1", "2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5, 7")
    assert gpus.visible_ids(2) == ["5", "7"]
    assert gpus.visible_ids(0) == []


def test_no_two_tasks_ever_hold_one_gpu_at_once():
    slots = gpus.GpuSlots(["0", "1", "2"])
    holders: dict[str, int] = {}
    lock = threading.Lock()
    clashes, seen = [], set()

    def task(_):
        with slots.hold() as gpu:
            with lock:
                holders[gpu] = holders.get(gpu, 0) + 1
                if holders[gpu] > 1:
                    clashes.append(gpu)
                seen.add(gpu)
            assert gpus.worker_env() == {"CUDA_VISIBLE_DEVICES": gpu}
            time.sleep(0.01)
            with lock:
                holders[gpu] -= 1
        assert gpus.current() is None

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(task, range(30)))
    assert not clashes
    assert seen == {"0", "1", "2"}


def test_outside_a_slot_workers_get_no_gpu_pinning():
    assert gpus.current() is None and gpus.worker_env() == {}
    with pytest.raises(ValueError):
        gpus.GpuSlots([])


def test_a_task_runs_on_a_held_gpu_and_a_failure_releases_it():
    config = load_config()
    slots = gpus.GpuSlots(["3"])

    def boom():
        raise RuntimeError("grader bug")

    failed = safely(Task("gemm naive", ["gemm.naive.correctness"], boom), config, slots)
    assert failed[0].points == 0 and "grader bug" in failed[0].message
    seen = safely(Task("env", [], lambda: [gpus.worker_env()]), config, slots)
    assert seen == [{"CUDA_VISIBLE_DEVICES": "3"}]  # the slot came back after the failure


def test_speed_is_measured_against_the_references_of_the_gpu_the_task_holds(monkeypatch):
    got = []
    monkeypatch.setattr(gemm_part, "grade_kernel",
                        lambda kernel, folder, workroot, config, on_gpu, ref, verdicts=None:
                        got.append(ref))
    per_gpu = {"0": "ref-on-0", "1": "ref-on-1"}
    for gpu in ("1", "0"):
        with gpus.pinned(gpu):
            grade_kernel("naive", None, None, None, True, per_gpu)
    grade_kernel("naive", None, None, None, True, {"0": "only"})  # one GPU, none held
    grade_kernel("naive", None, None, None, False, None)  # simulator
    assert got == ["ref-on-1", "ref-on-0", "only", None]


def test_references_are_timed_on_every_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(gemm_part, "measure_reference",
                        lambda config, workroot: (gpus.current(), workroot.name))
    refs = gemm_references(load_config(), tmp_path, gpus.GpuSlots(["0", "2"]))
    assert refs == {"0": ("0", "gpu0"), "2": ("2", "gpu2")}


def test_mpi_ranks_on_one_machine_split_its_gpus():
    ids = ["0", "1", "2", "3"]
    assert [gpus.local_share(ids, r, 2) for r in range(2)] == [["0", "2"], ["1", "3"]]
    assert [gpus.local_share(ids, r, 4) for r in range(4)] == [["0"], ["1"], ["2"], ["3"]]
    assert [gpus.local_share(["0", "1"], r, 3) for r in range(3)] == [["0"], ["1"], ["0"]]
    assert gpus.local_share([], 0, 2) == []


def test_shared_gpus_admit_per_gpu_tasks_and_a_timed_job_runs_alone():
    """Up to per_gpu tasks share a GPU; inside gpus.exclusive() a task is the only one
    on its GPU (the others wait outside), and no GPU ever holds more than per_gpu."""
    slots = gpus.GpuSlots(["0", "1"], per_gpu=3)
    assert slots.threads == 6
    lock = threading.Lock()
    running: dict[str, int] = {"0": 0, "1": 0}
    alone: dict[str, bool] = {"0": False, "1": False}
    most, clashes = {"0": 0, "1": 0}, []

    def task(n):
        with slots.hold() as gpu:
            with lock:
                running[gpu] += 1
                most[gpu] = max(most[gpu], running[gpu])
                if alone[gpu]:
                    clashes.append(("shared beside a timed job", gpu))
            time.sleep(0.005)
            with lock:
                running[gpu] -= 1
            if n % 4 == 0:
                with gpus.exclusive():
                    with lock:
                        if running[gpu]:
                            clashes.append(("timed beside shared", gpu, running[gpu]))
                        alone[gpu] = True
                    time.sleep(0.005)
                    with lock:
                        alone[gpu] = False
                assert gpus.current() == gpu  # back to its shared hold of the same GPU
            with lock:
                running[gpu] += 1
            time.sleep(0.002)
            with lock:
                running[gpu] -= 1

    with ThreadPoolExecutor(slots.threads) as pool:
        list(pool.map(task, range(60)))
    assert clashes == []
    assert max(most.values()) <= 3 and max(most.values()) >= 2  # shared, and bounded


def test_exclusive_without_a_shared_pool_changes_nothing():
    with gpus.exclusive():
        assert gpus.current() is None
    slots = gpus.GpuSlots(["4"])  # one task per GPU: the GPU is the task's alone already
    with slots.hold() as gpu, gpus.exclusive():
        assert gpus.current() == gpu == "4"


def test_timed_jobs_go_through_in_batches():
    """With 4 tasks to a GPU, one timed job waiting lets shared tasks in (the GPU stays
    busy), two waiting stop them: the timed jobs then run back to back."""
    slots = gpus.GpuSlots(["0"], per_gpu=4)
    release = threading.Event()
    entered: list[str] = []

    def shared_task(name):
        with slots.hold():
            entered.append(name)
            release.wait(5)

    def timed_task(name):
        with slots.hold(), gpus.exclusive():
            entered.append(name)

    first = threading.Thread(target=shared_task, args=("s1",))
    first.start()
    while "s1" not in entered:
        time.sleep(0.001)
    t1 = threading.Thread(target=timed_task, args=("t1",))
    t1.start()
    time.sleep(0.05)
    second = threading.Thread(target=shared_task, args=("s2",))
    second.start()
    time.sleep(0.05)
    assert entered == ["s1", "s2"]  # one timed job waiting: shared tasks still enter
    t2 = threading.Thread(target=timed_task, args=("t2",))
    t2.start()
    time.sleep(0.05)
    third = threading.Thread(target=shared_task, args=("s3",))
    third.start()
    time.sleep(0.05)
    assert entered == ["s1", "s2"]  # two waiting: their turn, no new shared task
    release.set()
    for thread in (first, t1, second, t2, third):
        thread.join(5)
    assert entered[2:4] in (["t1", "t2"], ["t2", "t1"]) and entered[4] == "s3"
