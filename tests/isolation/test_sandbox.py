"""The sandbox's parts (grader/isolation/sandbox.py, grader/isolation/jail.py,
grader/checks/anticheat.py), timed calls that must see fresh operands and a true clock,
and grading that gives the same verdicts twice."""

import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.cases.gemm import GemmCase, job_inputs
from grader.checks import anticheat
from grader.checks.gemm import check_perf
from grader.isolation import probe, sandbox
from grader.isolation.runner import copy_submission, run_worker
from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config
from grader.worker.jobs import GemmJob
from nnkit.collectives import find_mpiexec
from tests.conftest import KIT_ROOT, TESTS, run_kit

CHEATS = TESTS / "cheats"


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


def test_the_worker_gets_its_package_and_nothing_else_of_the_grader(tmp_path):
    """Only grader/worker/ is staged: it must import nothing else of the grader, and the
    staged nnkit holds no solution body (its twins of student functions are stubs)."""
    assert sandbox.worker_imports_outside() == []
    kit = sandbox.staged_kit()
    assert (kit / "nnkit" / "backend.py").is_file() and not (kit / "solution").exists()
    # (compiled once by the grader: the bytecode of those files only)
    assert sorted(p.name for p in (kit / "grader").iterdir()) == ["__init__.py",
                                                                  "__pycache__", "worker"]
    assert [p.name.split(".")[0] for p in (kit / "grader" / "__pycache__").iterdir()] == [
        "__init__"]
    assert (kit / "grader" / "worker" / "guard.py").is_file()
    for path in (kit / "nnkit").rglob("*.py"):
        assert "### BEGIN SOLUTION" not in path.read_text(), path
    twin = (kit / "nnkit" / "collectives.py").read_text().split("def scatter_batch", 1)[1]
    twin = twin.split("\ndef ", 1)[0]
    assert "NotImplementedError" in twin and "comm.Scatterv(" not in twin, twin


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


SECRET, PERF_SEED = 5, 11


def _perf_job(tmp_path, source: str) -> tuple[GemmCase, object]:
    sub = tmp_path / "sub"
    sub.mkdir(parents=True)
    (sub / "gemm_1_naive.py").write_text(source)
    case = GemmCase(9, 7, 5, 2.0, 5.0, seed=900)
    workdir = tmp_path / "job"
    copy = copy_submission(sub, workdir / "submission")
    job = GemmJob(submission=str(copy), module="gemm_1_naive", function="gemm_naive",
                  perf=[case.to_json()], repeats=3, warmup=1, perf_seed=PERF_SEED)
    return case, run_worker(job, workdir, 120, on_gpu=False,
                            inputs=job_inputs([], [case], SECRET))


def _perf(case, run):
    return check_perf(case, run.outdir, 0, "", secret=SECRET, perf_seed=PERF_SEED)


def test_timed_calls_get_new_operands_and_a_true_clock(tmp_path):
    """The replaying cheat is caught on its second timed call (which launched nothing);
    an honest kernel is timed, and one that replaces time.perf_counter when imported is
    refused for changing the clock."""
    replay = (CHEATS / "replay" / "gemm_1_naive.py").read_text()
    case, run = _perf_job(tmp_path / "replay", replay)
    outcome = _perf(case, run)
    assert outcome.seconds is None and "launched none of the submission's kernels" in \
        outcome.message, outcome.message

    honest = (KIT_ROOT / "solution" / "gemm_1_naive.py").read_text()
    case, run = _perf_job(tmp_path / "honest", honest)
    assert _perf(case, run).message == "no GPU timings"  # every sample right; no GPU here
    data = json.loads((run.outdir / "perf-0.json").read_text())
    assert len(data["host"]) == 3 and all(t > 1e-5 for t in data["host"]), data
    assert data["launches"] == [1, 1, 1, 1]

    case, run = _perf_job(tmp_path / "clock", "import time\ntime.perf_counter = lambda: 1.0\n"
                          + honest)
    outcome = _perf(case, run)
    assert outcome.seconds is None and "time.perf_counter" in outcome.message, outcome.message


@pytest.mark.slow
def test_grading_twice_gives_the_same_correctness_verdicts(tmp_path):
    """Operands come from the run's secret seed and checks from fixed bounds: two runs
    with the same --seed agree on every point and message."""
    runs = []
    for n in range(2):
        out = tmp_path / f"run{n}"
        result = run_kit("grader", "solution", "starter", "--bugs",
                         str(KIT_ROOT / "tests" / "bugs" / "checker" / "gemm"),
                         "--parts", "gemm", "--kernels", "naive", "--jobs", "2",
                         "--seed", "7", "--out", str(out))
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
    if _machine_allows_pivot_root():
        assert "new root (allow-list)" in line, line


PIVOT = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
assert libc.mount(b"none", b"/", None, ctypes.c_ulong(16384 | 262144), None) == 0
os.makedirs("/tmp/nnkit-pivot-probe", exist_ok=True)
assert libc.mount(b"tmpfs", b"/tmp/nnkit-pivot-probe", b"tmpfs", ctypes.c_ulong(0), None) == 0
os.chdir("/tmp/nnkit-pivot-probe")
assert libc.syscall(155, b".", b".") == 0
"""


def _machine_allows_pivot_root() -> bool:
    if not _machine_allows_namespaces() or os.uname().machine != "x86_64":
        return False
    probe = subprocess.run(["unshare", "--mount", "--fork", sys.executable, "-I", "-S", "-c",
                            PIVOT], capture_output=True)
    return probe.returncode == 0


# ---------------------------------------------------------------------------------------
# Jobs in the jail, one small script each: what one job leaves, what the next one finds

# Uids of this module's jobs only; a small scratch (MPICH's shared memory, in /dev/shm,
# needs more than 16 MB for 2 ranks), and a memory limit that three processes of 800 MB
# each exceed together (the group's limit is 1.5 GB + 512 MB) though each stays under it
# (numpy's import alone needs 512 MB of address space with 16 cores).
JOBS = sandbox.Settings(uid_first=76000 + os.getpid() % 1000 * 4, uid_count=4,
                        scratch_mb=64, memory_mb_simulator=1536)
SHM_KEY = 0x4E4E0000 + os.getpid() % 0x10000


def _caps() -> sandbox.Capabilities:
    return probe.capabilities(JOBS)


def _needs(what: str) -> None:
    caps = _caps()
    if not getattr(caps, what):
        why = caps.cgroup_note if what == "cgroup" else caps.describe(JOBS)
        pytest.skip(f"this machine gives jobs no {what}: {why}")


def _job(tmp_path: Path, code: str, name: str = "job", launcher: tuple = (),
         box_out: list | None = None) -> tuple[int, str]:
    """Run `python -c code` as a sandboxed job; (its exit status, its output)."""
    workdir = tmp_path / name
    workdir.mkdir()
    with sandbox.Sandbox(JOBS, _caps(), workdir, on_gpu=False) as box:
        if box_out is not None:
            box_out.append(box)
        argv = [*launcher, sys.executable, "-P", "-c", textwrap.dedent(code)]
        proc = subprocess.Popen(box.command(argv), cwd=workdir, env=box.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=60)
        finally:
            box.kill(proc)
            proc.wait()
    return proc.returncode, out


def _seen(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


TRY_READ = """
    import json, sys
    seen = {}
    for path in sys.argv[1:] if len(sys.argv) > 1 else PATHS:
        try:
            seen[path] = open(path).read()[:20]
        except OSError as err:
            seen[path] = type(err).__name__
    print(json.dumps(seen))
"""


def test_other_copies_of_the_kit_are_absent(tmp_path):
    """The allow-list: a copy of the kit anywhere else on the machine (/opt, beside the
    checkout) is not in the job's root at all, nor is /run, /var or the checkout."""
    _needs("root")
    copies = []
    for parent in (Path("/opt"), Path("/var/lib"), KIT_ROOT.parent):
        if parent.is_dir() and os.access(parent, os.W_OK):
            copy = parent / f"nnkit-test-{os.getpid()}"
            (copy / "solution").mkdir(parents=True)
            (copy / "solution" / "gemm_1_naive.py").write_text("SOLUTION\n")
            for path in (copy, copy / "solution"):
                path.chmod(0o755)
            (copy / "solution" / "gemm_1_naive.py").chmod(0o644)
            copies.append(copy)
    try:
        assert copies, "no folder to put a copy in"
        paths = [str(c / "solution" / "gemm_1_naive.py") for c in copies]
        paths.append(str(KIT_ROOT / "solution" / "gemm_1_naive.py"))
        code = f"PATHS = {paths!r}\n" + textwrap.dedent(TRY_READ) + textwrap.dedent("""
            import os
            print(json.dumps({"top": sorted(os.listdir("/")), **seen}))
        """)
        status, out = _job(tmp_path, code)
        assert status == 0, out
        seen = _seen(out)
        for path in paths:
            assert seen[path] == "FileNotFoundError", (path, seen)
        assert not {"run", "var", "srv", "mnt", "media"} & set(seen["top"]), seen["top"]
    finally:
        for copy in copies:
            shutil.rmtree(copy)


SHM = """
    import ctypes, errno, json, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    KEY, SEEN = {key}, {{}}
"""
FIRST = """
    shm = libc.shmget(KEY, 4096, 0o1666)  # IPC_CREAT, readable by all
    assert shm >= 0, os.strerror(ctypes.get_errno())
    ctypes.memmove(libc.shmat(shm, None, 0), b"left by job 1", 13)
    for folder in ("/tmp", "/dev/shm", "/run/lock"):
        try:
            open(folder + "/left-by-job-1", "w").write("x")
            SEEN[folder] = "written"
        except OSError as err:
            SEEN[folder] = type(err).__name__
    SEEN["lock"] = os.path.exists("{lock}")
    print(json.dumps(SEEN))
"""
SECOND = """
    SEEN["shm"] = libc.shmget(KEY, 0, 0) == -1 and ctypes.get_errno() == errno.ENOENT
    for folder in ("/tmp", "/dev/shm", "/run/lock"):
        SEEN[folder] = os.path.exists(folder + "/left-by-job-1")
    print(json.dumps(SEEN))
"""


def test_nothing_a_job_leaves_in_shared_places_reaches_the_next(tmp_path):
    """System V shared memory (an IPC namespace per job), /tmp and /dev/shm (private
    tmpfs) and /run/lock (absent from the new root; a private tmpfs in the deny-list)."""
    _needs("ipc")
    lock = Path("/run/lock") / f"nnkit-test-{os.getpid()}"
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        if lock.parent.is_dir():
            lock.write_text("the machine's")
        head = SHM.format(key=SHM_KEY)
        status, out = _job(tmp_path, head + FIRST.format(lock=lock), "first")
        assert status == 0, out
        first = _seen(out)
        assert first["lock"] is False and first["/tmp"] == first["/dev/shm"] == "written"
        status, out = _job(tmp_path, head + SECOND, "second")
        assert status == 0, out
        assert _seen(out) == {"shm": True, "/tmp": False, "/dev/shm": False,
                              "/run/lock": False}, out
        # Nor did anything reach the machine.
        assert libc.shmget(SHM_KEY, 0, 0) == -1
        assert not Path("/run/lock/left-by-job-1").exists()
    finally:
        shm = libc.shmget(SHM_KEY, 0, 0)
        if shm >= 0:
            libc.shmctl(shm, 0, None)  # IPC_RMID: one that leaked, from a failed run
        lock.unlink(missing_ok=True)


def test_scratch_is_capped(tmp_path):
    _needs("mount")
    status, out = _job(tmp_path, f"""
        import json
        seen = {{}}
        for folder in ("/tmp", "/dev/shm"):
            with open(folder + "/big", "wb") as f:
                try:
                    for _ in range({JOBS.scratch_mb + 1}):  # 1 MB more than the cap
                        f.write(b"x" * (1 << 20))
                        f.flush()
                    seen[folder] = "fits"
                except OSError as err:
                    seen[folder] = err.errno
        print(json.dumps(seen))
    """)
    assert status == 0, out
    assert _seen(out) == {"/tmp": errno.ENOSPC, "/dev/shm": errno.ENOSPC}, out


MEMORY = """
    import os, select
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    children = []
    for _ in range(3):  # 2.4 GB in all, 800 MB each: every one under its rlimit of 1.5 GB
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            block = b"x" * (800 << 20)
            os.write(ready_w, b"1")
            os.read(go_r, 1)  # hold it until the parent lets go: all three at once
            os._exit(0)
        children.append(pid)
    os.close(ready_w)
    ready, ended = 0, {}
    while ready < 3 and not ended:  # until all hold theirs, or one is dead
        if select.select([ready_r], [], [], 0.1)[0]:
            got = os.read(ready_r, 3)
            ready += len(got)
            if not got:
                break
        for pid in set(children) - set(ended):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                ended[pid] = os.waitstatus_to_exitcode(status)
    os.close(go_w)
    statuses = [ended[p] if p in ended else os.waitstatus_to_exitcode(os.waitpid(p, 0)[1])
                for p in children]
    print("held", ready, "statuses", statuses)
"""


def test_the_cgroup_holds_the_whole_job_to_the_memory_limit(tmp_path):
    """What rlimits miss: three processes each under the address-space limit, together
    over it. The cgroup's OOM killer ends the job (v2: all of it; v1: the largest)."""
    _needs("cgroup")
    boxes = []
    status, out = _job(tmp_path, MEMORY, box_out=boxes)
    assert status == -9 or "-9" in out, (status, out)
    assert "held 3 statuses [0, 0, 0]" not in out
    assert boxes[0].cgroup is None  # removed on leaving the sandbox


def test_kill_ends_the_job_and_the_sandbox_removes_its_cgroup(tmp_path):
    _needs("cgroup")
    workdir = tmp_path / "job"
    workdir.mkdir()
    code = ("import os, subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
            " start_new_session=True)\n"
            "print('started', flush=True)\ntime.sleep(60)\n")
    with sandbox.Sandbox(JOBS, _caps(), workdir, on_gpu=False) as box:
        proc = subprocess.Popen(box.command([sys.executable, "-P", "-c", code]), cwd=workdir,
                                env=box.env, stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        assert proc.stdout.readline().strip() == "started"
        group = box.cgroup
        assert len(group.pids()) >= 3  # the jail, the worker, its detached child
        box.kill(proc)
        assert proc.wait(timeout=10) == -9 and group.pids() == set()
        folders = list(group.dirs)
    assert folders and not any(folder.exists() for folder in folders)


def test_an_honest_worker_runs_in_the_jail(tmp_path, monkeypatch):
    """numpy, the staged kit (not the checkout) and the MNIST folder are all there."""
    _needs("mount")
    data = tmp_path / "mnist"
    data.mkdir()
    (data / "t10k-labels-idx1-ubyte.gz").write_bytes(b"labels")
    monkeypatch.setenv("NNKIT_DATA", str(data))
    status, out = _job(tmp_path, """
        import json, os
        import numpy
        import grader.worker, nnkit.backend
        from nnkit.mnist import default_dir
        print(json.dumps({"sum": float(numpy.arange(4).sum()),
                          "worker": grader.worker.__file__, "nnkit": nnkit.backend.__file__,
                          "data": (default_dir() / "t10k-labels-idx1-ubyte.gz").read_text()}))
    """)
    assert status == 0, out
    seen, kit = _seen(out), str(sandbox.staged_kit())
    assert seen["sum"] == 6.0 and seen["data"] == "labels", seen
    assert seen["worker"].startswith(kit) and seen["nnkit"].startswith(kit), seen


@pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec")
def test_mpi_runs_in_the_jail(tmp_path):
    """Hydra (mpiexec) and its ranks inside the job's root: loopback, /dev/shm, /tmp."""
    _needs("mount")
    from nnkit.collectives import mpiexec_command

    status, out = _job(tmp_path, """
        from mpi4py import MPI
        import numpy as np
        comm = MPI.COMM_WORLD
        total = np.empty(100000)
        comm.Allreduce(np.full(100000, comm.rank + 1.0), total)
        seen = comm.gather((comm.rank, comm.size, float(total[0])))
        if comm.rank == 0:  # one writer: the ranks' lines could interleave
            print("ranks", seen, flush=True)
    """, launcher=tuple(mpiexec_command(2)))
    assert status == 0, out
    assert "ranks [(0, 2, 3.0), (1, 2, 3.0)]" in out.splitlines(), out


def test_simulator_jobs_keep_few_malloc_arenas(tmp_path):
    """A thread per CUDA thread: with glibc's default arenas (8 per core, 64 MB of address
    space each) a 16-core grading machine put the simulator's jobs past their memory limit
    and thread starts failed. GPU jobs keep the default."""
    from grader.isolation.settings import current

    sim = sandbox.clean_env(current(), False, tmp_path, tmp_path)
    gpu = sandbox.clean_env(current(), True, tmp_path, tmp_path)
    assert sim["MALLOC_ARENA_MAX"] == "2" and sim["NNKIT_DEVICE"] == "sim"
    assert "MALLOC_ARENA_MAX" not in gpu or gpu["MALLOC_ARENA_MAX"] == os.environ.get(
        "MALLOC_ARENA_MAX")
