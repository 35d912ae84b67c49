"""Submissions that cheat (tests/cheats/, described in its README): each is caught with a
clear message and earns nothing, while the solution graded in the same run keeps every
point. Confinement the machine does not offer (a uid of the job's own, namespaces) is
reported by the grader on stderr; the checks that need it are skipped without it."""

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from grader.scoring import DEFAULT_CONFIG
from tests.conftest import KIT_ROOT, TESTS, run_kit, selected_names, selected_values

CHEATS = TESTS / "cheats"
NAMES = sorted(p.name for p in CHEATS.iterdir() if p.is_dir())
# The cheats `make test` grades, one or two per defence: the audit hook (write_results,
# exec_string, fork_bomb), the sandbox's process and file confinement (background,
# write_results), the reuse case (replay), launch recording and replay (dummy_kernel),
# the library traps (matmul_hidden), the module photograph (monkeypatch), the
# simulator's kernel restrictions (kernel_host_numpy), the replay on new operands
# (scalar_smuggle), the rule that only the submission's kernels run (kit_kernels) and
# the watch on the recorder (recorder_forge).
# The others are marked slow: `make test-all` grades every one. The fixture grades only
# the cheats the selected tests look at.
QUICK = {"write_results", "exec_string", "fork_bomb", "background", "replay", "dummy_kernel",
         "matmul_hidden", "monkeypatch", "kernel_host_numpy", "scalar_smuggle",
         "kit_kernels", "recorder_forge"}
# Cheats that tests other than the per-cheat ones look at.
NEEDS = {"test_no_process_outlives_its_job": {"background", "fork_bomb"},
         "test_reports_cannot_be_written_by_a_submission": {"write_results", "background"},
         "test_library_products_are_caught_when_called_and_when_written": {
             "matmul_hidden", "matmul_operator", "dot_method", "torch_import",
             "einsum_or_cupy"}}


def _sweep(names: list[str]) -> list:
    """The cheats as parameters, those outside QUICK marked slow."""
    return [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in names]
SECRET = "NNKIT_TEST_SECRET"
BACKGROUND_NAME = "nnkit-cheat-bg"
# Uids of this test's jobs only: other grading runs on the machine use the default range.
UID_FIRST = 70000 + os.getpid() % 10000 * 4
# The workers' memory limits in this test: lowered in the simulator, the default on a GPU
# (CUDA reserves a large address space).
MEMORY_MB = {"simulator": 3072, "gpu": 65536}
# Limits low enough to make the bombs quick, high enough for the naive kernel's 256
# simulator threads (and, on a GPU, for numba's first compile: about 15 s a job).
LIMITS = {"seconds_simulator = 600": "seconds_simulator = 15",
          "seconds_gpu = 180": "seconds_gpu = 60",
          "memory_mb_simulator = 4096": f"memory_mb_simulator = {MEMORY_MB['simulator']}",
          # unchanged; listed so that the fixture checks the config still says so
          f"memory_mb_gpu = {MEMORY_MB['gpu']}": f"memory_mb_gpu = {MEMORY_MB['gpu']}",
          "processes = 2048": "processes = 400",
          "uid_first = 64000": f"uid_first = {UID_FIRST}",
          "uid_count = 64": "uid_count = 4",
          # The static policy would stop most of them before they run: report only, so
          # that the run-time layers are what this test tries (tests/checks/test_policy.py and
          # the test below try the policy).
          'policy = "enforce"': 'policy = "report"'}


def _procs_named(name: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _procs_of_uids(first: int, count: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and first <= int(line.split()[1]) < first + count:
                pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    wanted = selected_values(request, "name")
    for test in selected_names(request):
        wanted |= NEEDS.get(test, set())
    names = [n for n in NAMES if n in wanted]
    tmp = tmp_path_factory.mktemp("cheats")
    out, subs = tmp / "out", tmp / "subs"
    other = shutil.copytree(KIT_ROOT / "solution", subs / "solution")
    fill = {"@KIT_ROOT@": str(KIT_ROOT), "@OUT@": str(out), "@OTHER@": str(other)}
    for name in names:
        shutil.copytree(CHEATS / name, subs / name)
        module = subs / name / "gemm_1_naive.py"
        text = module.read_text()
        for key, value in fill.items():
            text = text.replace(key, value)
        module.write_text(text)
    config = DEFAULT_CONFIG.read_text()
    for old, new in LIMITS.items():
        assert old in config
        config = config.replace(old, new)
    (tmp / "config.toml").write_text(config)
    slow = ["fork_bomb", "memory_bomb"]  # first, so that the others run beside them
    order = [n for n in slow if n in names] + [n for n in names if n not in slow]
    result = run_kit("grader", *(str(subs / n) for n in order), str(other),
                     "--parts", "gemm", "--kernels", "naive", "--jobs", "2",
                     "--config", str(tmp / "config.toml"), "--out", str(out),
                     env={SECRET: "a grader secret"})
    survivors = _procs_named(BACKGROUND_NAME)
    leftovers = _procs_of_uids(UID_FIRST, 4)
    for pid in survivors:  # started by the background cheat of this test: end it here
        os.kill(pid, signal.SIGKILL)
    planted = [folder / f"planted-by-cheat{suffix}" for folder in (out, KIT_ROOT,
                                                                   KIT_ROOT / "grades")
               for suffix in (".json", ".csv")]
    planted = [p for p in planted if p.exists()]
    for path in planted:
        path.unlink()
    assert result.returncode == 0, result.stderr[-3000:]
    reports = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    line = next((s for s in result.stderr.splitlines() if s.startswith("sandbox:")), "")
    return {"reports": reports, "sandbox": line, "survivors": survivors,
            "leftovers": leftovers, "planted": planted}


def _item(graded, name):
    report = graded["reports"][name]
    return next(i for i in report["items"] if i["id"] == "gemm.naive.correctness")


def _needs(graded, *ways):
    """Skip unless the grader confined jobs in one of these ways (its stderr says how)."""
    if not any(way in graded["sandbox"] for way in ways):
        pytest.skip(f"the grader could not confine jobs this way here ({graded['sandbox']})")


# Files out of reach: hidden by a mount namespace, or closed to a job's own uid.
FILES_CONFINED = ("mount", "run as uids")


def test_the_solution_graded_beside_them_keeps_every_point(graded):
    item = _item(graded, "solution")
    assert item["points"] == item["max_points"] > 0, item["message"]
    assert "library_products" not in item["figures"]


@pytest.mark.parametrize("name", _sweep(NAMES))
def test_every_cheat_earns_nothing(graded, name):
    item = _item(graded, name)
    assert item["points"] == 0 and item["status"] == "fail", item["message"]


# What the feedback says of each cheat (all of these fragments, in the item's message).
STOPPED = "the grader stopped the submission"
# (on the call's own operands, or on the new ones a replay starts from)
NOT_ITS_KERNELS = "the kernels the call launched"
NO_KERNEL = "launched none of the submission's kernels"
MESSAGES = {
    "matmul_operator": ["library matrix product", "the @ operator"],
    "matmul_hidden": ["library matrix product", "numpy.matmul", "gemm_1_naive.py"],
    "einsum_or_cupy": ["library matrix product"],
    "dot_method": ["library matrix product", "dot"],
    "torch_import": ["library matrix product", "import torch"],
    "replay": ["previous call's result", "cached or replayed"],
    "mutate_inputs": ["modified its input A"],
    "exit_at_import": ["stopped early"],
    "sysexit_in_call": ["SystemExit"],
    "keyboard_interrupt": ["could not load the module", "KeyboardInterrupt"],
    "monkeypatch": ["changed the kit or a library"],
    "fake_equality": ["changed the kit or a library", "numpy.savez"],
    "write_results": [STOPPED, "opened a file outside its folder"],
    "background": [STOPPED, "forked the worker"],
    "memory_bomb": ["MemoryError", "the worker's memory limit is"],
    "fork_bomb": [STOPPED, "forked the worker"],
    "snoop": [STOPPED, "opened a file outside its folder"],
    # Library products the traps cannot see, and products computed with no library at
    # all: no kernel ran, or the kernels that ran do not produce the result.
    # NumPy's einsum engine: trapped like the public products (it was not, at first).
    "c_einsum": ["library matrix product", "c_einsum"],
    "einsum_engine_in_kernel": ["library matrix product", "c_einsum"],
    "broadcast_sum": [NO_KERNEL],
    "trap_closure": ["np.matmul"],
    "dummy_kernel": [NOT_ITS_KERNELS],
    "temp_buffer": [NOT_ITS_KERNELS],
    # The answer handed to a kernel as arguments: the replay on new operands. (On a GPU
    # its host loops cannot finish the large cases in time: it earns nothing either way.)
    # The kit's own kernels doing the work beside an idle one of the submission's.
    "kit_kernels": ["kernels that are not the submission's"],
    # The kit's recorder, reached through what it hands nnkit.backend, given a forged
    # replay: the recorder is watched like the kit's modules.
    "recorder_forge": ["changed the kit or a library", "Recorder.replay"],
    # A method of the submission's class called with nnkit.backend as self, to reach
    # its private copy observer: the sealed class refuses a foreign self.
    "unbound_self": ["Peek.swap was called with 'module' as its first argument"],
    # Half the precision, for speed: the float32 error bound of the short sums.
    "half_precision": ["elements wrong", "bound"],
    "scalar_smuggle": {"simulator": [NOT_ITS_KERNELS, "on new operands"], "gpu": []},
    # Reaching around the language: the audit hook stops the worker.
    "openblas_ctypes": [STOPPED],
    "gc_disarm": [STOPPED, "with gc"],
    "read_inputs": [STOPPED, "outside its own"],
    # Python 3.12 audits the thread's start (refused there); 3.11 does not, and the library
    # call inside the thread is refused instead, for the submission.
    "thread_escape": [STOPPED, ("a thread it started", "started a thread")],
    "exec_string": [STOPPED, "code from a string"],
    "kill_parent": [STOPPED, "sent a signal"],
    # A kernel body doing NumPy work on whole rows: the simulator refuses what a GPU could
    # not compile (on a GPU, numba's compiler refuses it).
    "kernel_host_numpy": {"simulator": ["would not run on a GPU"], "gpu": []},
    # Forging the clock or the copies the grader makes: the module photograph.
    "clock_swap": ["changed the kit or a library", "nnkit.timing._clock"],
    "lazy_launch": ["changed the kit or a library", "nnkit.backend.to_host"],
}


@pytest.mark.parametrize("name", _sweep(NAMES))
def test_every_cheat_gets_a_clear_message(graded, name):
    message = _item(graded, name)["message"]
    fragments = MESSAGES[name]
    if isinstance(fragments, dict):  # what is said depends on where it ran
        on_gpu = "GPU" in graded["reports"][name]["backend"]
        fragments = fragments["gpu" if on_gpu else "simulator"]
    for fragment in fragments:  # a tuple: any one of these
        alternatives = fragment if isinstance(fragment, tuple) else (fragment,)
        assert any(a in message for a in alternatives), message
    if name == "memory_bomb":  # the limit of the mode it ran in, as the test set it
        mode = "gpu" if "GPU" in graded["reports"][name]["backend"] else "simulator"
        assert f"memory limit is {MEMORY_MB[mode]} MB" in message, message


@pytest.mark.slow
def test_library_products_are_caught_when_called_and_when_written(graded):
    def found(name):
        return _item(graded, name)["figures"]["library_products"]

    # Only the run-time trap sees a product reached through a computed name...
    assert any("numpy.matmul" in c for c in found("matmul_hidden")["called"])
    assert found("matmul_hidden")["in_source"] == []
    # ... and both see the plain ones.
    for name, called, written in [("matmul_operator", "@ operator", "@ operator"),
                                  ("dot_method", "dot() method", ".dot")]:
        assert any(called in c for c in found(name)["called"]), found(name)
        assert any(written in w for w in found(name)["in_source"]), found(name)
    # Importing torch is stopped by the audit hook before the trap would see it.
    assert any("import torch" in w for w in found("torch_import")["in_source"])
    assert "imported a module graded code may not use" in _item(graded, "torch_import")["message"]
    on_gpu = "GPU" in graded["reports"]["einsum_or_cupy"]["backend"]
    trapped = "cupy.matmul" if on_gpu else "numpy.einsum"
    assert any(trapped in c for c in found("einsum_or_cupy")["called"])
    assert {"cupy.matmul", "np.einsum"} <= {w.split(" ")[0]
                                            for w in found("einsum_or_cupy")["in_source"]}


def test_no_process_outlives_its_job(graded):
    _needs(graded, "run as uids", "PID")  # both find and kill detached processes
    assert graded["survivors"] == [] and graded["leftovers"] == []


def test_reports_cannot_be_written_by_a_submission(graded):
    _needs(graded, *FILES_CONFINED)
    assert graded["planted"] == []



class _ArmedTraps:
    armed = True

    def hit(self, what: str) -> str:
        return what


def test_imports_are_refused_unless_a_trusted_library_asks(tmp_path, monkeypatch):
    """numba compiling a kernel may import scipy.linalg during the student's call (found on
    a GPU machine with SciPy installed): allowed. The same import from the student's code,
    directly or through exec, is refused."""
    import sys

    from grader.worker import traps as anticheat

    package = tmp_path / "compilerlib"
    package.mkdir()
    (package / "__init__.py").write_text(
        "def ask(guard):\n    return guard.find_spec('scipy.linalg')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import compilerlib

    guard = anticheat.ImportGuard(_ArmedTraps())
    with pytest.raises(anticheat.ForbiddenCall, match="import scipy.linalg"):
        compilerlib.ask(guard)  # not trusted yet
    monkeypatch.setattr(anticheat, "TRUSTED_IMPORTERS", ("compilerlib",))
    assert compilerlib.ask(guard) is None
    with pytest.raises(anticheat.ForbiddenCall):
        guard.find_spec("scipy.linalg")
    with pytest.raises(anticheat.ForbiddenCall):
        exec("guard.find_spec('torch')", {"guard": guard})
    assert guard.find_spec("json") is None
    # The library itself, once imported that way, loading its own submodules: allowed.
    library = tmp_path / "scipylike"
    library.mkdir()
    (library / "__init__.py").write_text(
        "def ask(guard):\n    return guard.find_spec('scipy.linalg._misc')\n")
    import scipylike

    monkeypatch.setattr(anticheat, "TRUSTED_IMPORTERS", ())
    with pytest.raises(anticheat.ForbiddenCall):
        scipylike.ask(guard)
    monkeypatch.setattr(anticheat, "_LIBRARY_ROOTS", ("scipylike",))
    assert scipylike.ask(guard) is None
    for name in ("compilerlib", "scipylike"):
        sys.modules.pop(name, None)


def test_the_policy_fails_cheats_before_they_run(tmp_path):
    """With the default config, the static policy alone fails a cheat that reaches for
    NumPy's private C einsum or the garbage collector, and names the rule."""
    subs = [shutil.copytree(CHEATS / name, tmp_path / name) for name in ("c_einsum", "gc_disarm")]
    result = run_kit("grader", *map(str, subs), "--parts", "gemm", "--kernels", "naive",
                     "--out", str(tmp_path / "out"), "--seed", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    for sub in subs:
        report = json.loads((tmp_path / "out" / f"{sub.name}.json").read_text())
        item = next(i for i in report["items"] if i["id"] == "gemm.naive.correctness")
        assert item["points"] == 0, item["message"]
        assert "breaks the rules for graded code" in item["message"], item["message"]


SPEED_CHEATS = TESTS / "cheats_speed"


@pytest.mark.gpu
@pytest.mark.slow
def test_speed_cheats_earn_no_speed_points(tmp_path):
    """Cheats on the timed calls only (tests/cheats_speed/, GPU): each is a right kernel,
    and keeps its correctness points, but its timed calls must do the whole product."""
    names = sorted(p.name for p in SPEED_CHEATS.iterdir() if p.is_dir())
    subs = [shutil.copytree(SPEED_CHEATS / n, tmp_path / n) for n in names]
    other = shutil.copytree(KIT_ROOT / "solution", tmp_path / "solution")
    out = tmp_path / "out"
    result = run_kit("grader", *map(str, subs), str(other), "--parts", "gemm", "--kernels",
                     "naive", "--jobs", "1", "--seed", "3", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]

    def item(name, which):
        report = json.loads((out / f"{name}.json").read_text())
        return next(i for i in report["items"] if i["id"] == f"gemm.naive.{which}")

    assert item("solution", "performance")["points"] > 0, item("solution", "performance")
    for name in names:
        assert item(name, "correctness")["points"] > 0, item(name, "correctness")["message"]
        speed = item(name, "performance")
        assert speed["points"] == 0 and "computed a wrong C" in speed["message"], speed
