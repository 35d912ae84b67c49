"""Confining the worker that runs submitted code (README, "Security").

What a worker gets depends on what the machine allows, probed once per grading process
(`capabilities`), best first:

- the grader runs as root: each job runs under a uid of its own (one per concurrent job,
  from [sandbox] uid_first, no account needed; its gid has the same number) and, where
  the kernel allows, in new mount, PID and network namespaces (grader/jail.py): the kit
  (solution/, .git, build/, the grader's sources), the temp folder (the grader's work
  folders, other jobs, the reports of tests), the grader's working folder, home folders
  and the folders of [sandbox] hide are covered by empty mounts; the Python installation,
  the staged kit (nnkit and the grader modules the worker imports), the data and the
  job's own folder are bound back; /tmp and /dev/shm become private scratch; the network
  has only loopback; the job's processes all die with its worker. Without namespaces,
  the uid alone keeps the job out of other jobs' folders and of anything not readable by
  all, and every process of the uid is killed when the job ends;
- not root: the same namespaces inside an unprivileged user namespace, where the system
  allows one; the job runs as the grader's own user;
- otherwise: only what every job gets.

Every job gets: resource limits (address space or data size, processes, file size, no
core files), a clean environment, the submission's private copy as working folder, its
output in a file the grader reads afterwards (never a pipe a leftover process could hold
open), and its results copied out of its folder only after every process of the job is
dead, as regular files only (a symlink or FIFO left there is skipped).
"""

from __future__ import annotations

import ast
import atexit
import fcntl
import fnmatch
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path

from nnkit.mnist import default_dir
from nnkit.submission import KIT_ROOT

JAIL = Path(__file__).with_name("jail.py")
SETUP_FAILED = 125  # the jail's exit status when it could not set the sandbox up
WORKER_MODULE = "grader.worker.__main__"
# Folders that are never covered: hiding one of them, or a folder holding one, would
# take the system away from the worker.
SYSTEM = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
          "/proc", "/sys", "/dev", "/run", "/var", "/boot")


class SandboxError(RuntimeError):
    """The sandbox could not be set up as configured."""


@dataclass(frozen=True)
class Settings:
    """[sandbox] of grader/config.toml; every field there is optional."""

    mode: str = "auto"  # "auto": the most this machine allows; "off": limits only
    uid_first: int = 64000
    uid_count: int = 64
    memory_mb_simulator: int = 4096  # RLIMIT_AS; 0: none
    memory_mb_gpu: int = 65536  # RLIMIT_DATA on a GPU (CUDA reserves a huge address range)
    processes: int = 2048  # RLIMIT_NPROC: processes and threads of the job
    file_mb: int = 512  # RLIMIT_FSIZE
    scratch_mb: int = 1024  # size of the private /tmp and /dev/shm
    thread_stack_kb: int = 1024  # stacks of the simulator's threads
    namespaces: bool = True  # False: never try mount, PID or network namespaces
    network: bool = False  # True: keep the machine's network
    hide: tuple[str, ...] = ("/home", "/root", "/srv", "/mnt", "/media", "/var/tmp")
    expose: tuple[str, ...] = ()
    env: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "NNKIT_DATA",
                            "OPENBLAS_*", "MKL_*", "OMP_*", "BLIS_*", "NVPL_*", "CUDA_*",
                            "NVIDIA_*", "NCCL_*", "NVSHMEM_*",
                            "TORCH_SYMM_MEM_DISABLE_MULTICAST")

    @classmethod
    def from_config(cls, raw: dict) -> Settings:
        """Settings from a parsed [sandbox] table; ValueError on unknown or bad values."""
        known = {f.name: f for f in fields(cls)}
        unknown = set(raw) - set(known)
        if unknown:
            raise ValueError(f"[sandbox]: unknown setting(s) {sorted(unknown)}")
        values = {}
        for name, value in raw.items():
            default = getattr(cls, name)
            if isinstance(default, tuple):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"[sandbox] {name}: expected a list of strings")
                value = tuple(value)
            elif isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ValueError(f"[sandbox] {name}: expected true or false")
            elif isinstance(default, int):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"[sandbox] {name}: expected an integer >= 0")
            values[name] = value
        settings = replace(cls(), **values)
        if settings.mode not in ("auto", "off"):
            raise ValueError('[sandbox] mode: expected "auto" or "off"')
        if settings.uid_count < 1 or settings.uid_first < 1000:
            raise ValueError("[sandbox]: need uid_first >= 1000 and uid_count >= 1")
        return settings


_settings = Settings()


def use(settings: Settings) -> None:
    """Make these the settings of every worker this process starts (load_config calls it)."""
    global _settings
    _settings = settings


def current() -> Settings:
    return _settings


# ---------------------------------------------------------------------------------------
# What the machine allows


@dataclass(frozen=True)
class Capabilities:
    as_user: bool = False  # root: jobs run under uids of their own
    user_namespace: bool = False  # not root: namespaces inside a user namespace
    mount: bool = False
    pid: bool = False
    net: bool = False
    memory_limit: bool = True  # False: CUDA did not start under the memory limit
    note: str = ""  # why the first choice did not work, when it did not

    def describe(self, settings: Settings) -> str:
        names = [n for n, on in (("mount", self.mount), ("PID", self.pid),
                                 ("network", self.net)) if on]
        where = (f" in new {', '.join(names[:-1]) + ' and ' * (len(names) > 1) + names[-1]} "
                 f"namespace{'s' * (len(names) > 1)}" if names else "")
        if self.as_user:
            last = settings.uid_first + settings.uid_count - 1
            who = f"run as uids {settings.uid_first}-{last}{where}"
        elif os.geteuid() == 0:
            who = "run as root, unconfined (no uid of their own could be used)"
        else:
            who = f"run as this user{where}"
        hidden = ("; the kit, the temp folder and home folders are hidden" if self.mount else
                  "; the kit's " + ", ".join(PRIVATE) + " are closed to other users"
                  if self.as_user else "")
        note = f" ({self.note})" if self.note else ""
        limits = limits_text(settings) + ("" if self.memory_limit else
                                          " (no memory limit: CUDA did not start under it)")
        return f"workers {who}{hidden}; limits: {limits}{note}"


def limits_text(settings: Settings) -> str:
    return (f"memory {settings.memory_mb_simulator or 'unlimited'} MB (simulator) / "
            f"{settings.memory_mb_gpu or 'unlimited'} MB (GPU), "
            f"{settings.processes or 'unlimited'} processes, "
            f"files {settings.file_mb or 'unlimited'} MB")


_caps: dict[tuple[Settings, bool], Capabilities] = {}
_caps_lock = threading.Lock()


def capabilities(settings: Settings, on_gpu: bool = False) -> Capabilities:
    """The best confinement that works here, tried with a real interpreter start (on a
    GPU, one that also starts CUDA)."""
    with _caps_lock:
        if (settings, on_gpu) not in _caps:
            _caps[settings, on_gpu] = _probe(settings, on_gpu)
        return _caps[settings, on_gpu]


def _candidates(settings: Settings, on_gpu: bool) -> list[Capabilities]:
    if settings.mode == "off":
        return []
    net = not settings.network
    full = [dict(mount=True, pid=True, net=net), dict(mount=True, pid=True),
            dict(mount=True), dict()] if settings.namespaces else [dict()]
    if os.geteuid() == 0:
        chosen = [Capabilities(as_user=True, **c) for c in full]
    else:
        chosen = [Capabilities(user_namespace=True, **c) for c in full if c]
    if not on_gpu:
        return chosen
    # The memory limit is the part least sure to suit CUDA: without it before less isolation.
    return [c for caps in chosen for c in (caps, replace(caps, memory_limit=False))]


PROBE = "import numpy, {module}"
PROBE_GPU = ("; from nnkit.backend import cuda, select, to_device; select()"
             "; cuda.current_context(); float(to_device(numpy.ones(4)).sum())")


def _probe(settings: Settings, on_gpu: bool) -> Capabilities:
    first_error = ""
    for caps in _candidates(settings, on_gpu):
        with tempfile.TemporaryDirectory(prefix="nnkit-probe-") as tmp:
            workdir = Path(tmp) / "job"
            workdir.mkdir()
            box = Sandbox(settings, caps, workdir, on_gpu=on_gpu, probing=True)
            with box:
                code = PROBE.format(module=WORKER_MODULE) + (PROBE_GPU if on_gpu else "")
                argv = [sys.executable, "-P", "-c", code]
                try:
                    result = subprocess.run(box.command(argv), cwd=workdir, env=box.env,
                                            stdin=subprocess.DEVNULL, capture_output=True,
                                            text=True, timeout=120, start_new_session=True)
                    ok, why = result.returncode == 0, result.stderr.strip()[-300:]
                except (OSError, subprocess.SubprocessError) as err:
                    ok, why = False, str(err)
        if ok:
            return replace(caps, note=f"the first choice failed: {first_error}"
                           if first_error else "")
        if not first_error:
            first_error = (why.splitlines() or ["no reason given"])[-1]
    if settings.mode == "off":
        return Capabilities(note="[sandbox] mode is off")
    return Capabilities(note=f"no confinement works here: {first_error}")


# ---------------------------------------------------------------------------------------
# The staged kit: what the worker may import, nothing else of the kit


_kit: Path | None = None
_kit_lock = threading.Lock()


WORKER_PACKAGE = Path(__file__).with_name("worker")


def worker_imports_outside() -> list[str]:
    """Modules of the grader that grader/worker/ imports from outside itself: none may
    be, since only the worker package is staged (a test keeps it so)."""
    found = set()
    for path in WORKER_PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                names = names if node.module != "grader" else [
                    f"grader.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("grader.") and not name.startswith("grader.worker"):
                    found.add(name)
    return sorted(found)


def staged_kit() -> Path:
    """What jobs may import of the kit, in a folder readable by all and writable by none
    but the grader (removed when the grader exits): nnkit/, with the kit's own copies of
    student functions stubbed as the student kit ships them, and grader/ holding the
    worker package only. No case builder, checker or reference answer is there."""
    global _kit
    with _kit_lock:
        if _kit is None:
            from grader.stubgen import BEGIN, stub_source

            root = Path(tempfile.mkdtemp(prefix="nnkit-kit-"))
            atexit.register(shutil.rmtree, root, True)
            skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
            shutil.copytree(KIT_ROOT / "nnkit", root / "nnkit", ignore=skip)
            for path in (root / "nnkit").rglob("*.py"):
                text = path.read_text()
                if BEGIN in text:
                    path.write_text(stub_source(text, str(path)))
            (root / "grader").mkdir()
            shutil.copy(Path(__file__).with_name("__init__.py"), root / "grader")
            shutil.copytree(WORKER_PACKAGE, root / "grader" / "worker", ignore=skip)
            for path in [root, *root.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)
            _kit = root
        return _kit


# ---------------------------------------------------------------------------------------
# Uids of jobs: one per concurrent job, also across grading processes of one machine


def _lock_dir() -> Path:
    base = Path("/run") if os.geteuid() == 0 and os.access("/run", os.W_OK) else Path(
        tempfile.gettempdir())
    folder = base / f"nnkit-sandbox-{os.geteuid()}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise SandboxError(f"{folder}: not a private folder of this user; remove it")
    return folder


def acquire_uid(settings: Settings) -> tuple[int, int]:
    """(uid, lock descriptor): a uid no other job holds, waiting for one if need be. The
    lock is an flock, so a grader that dies releases its uids."""
    folder = _lock_dir()
    while True:
        for uid in range(settings.uid_first, settings.uid_first + settings.uid_count):
            fd = os.open(folder / f"{uid}.lock",
                         os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return uid, fd
            except BlockingIOError:
                os.close(fd)
        time.sleep(0.2)


def release_uid(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _processes_of(uid: int) -> list[int]:
    """Live processes whose real or effective uid is `uid` (zombies left out)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        uids = status.get("Uid", "").split()[:2]
        if str(uid) in uids and not status.get("State", "").strip().startswith("Z"):
            pids.append(int(entry.name))
    return pids


def kill_uid(uid: int) -> None:
    """SIGKILL every process of the uid, again until none is left (a fork bomb's children
    are killed on the next pass)."""
    for _ in range(200):
        pids = _processes_of(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def _tasks_of(uid: int) -> int:
    """Processes and threads of a user (RLIMIT_NPROC counts them all)."""
    count = 0
    for pid in _processes_of(uid):
        try:
            count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            count += 1
    return count


# ---------------------------------------------------------------------------------------
# One job


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _python_paths() -> list[str]:
    """The interpreter, its standard library and every package folder on sys.path."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(sys.executable).parent)}
    paths |= {p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)}
    paths |= {os.path.realpath(p) for p in paths} | {
        os.path.dirname(os.path.realpath(sys.executable))}
    # The kit stays hidden, except the virtual environment that `make` creates inside it
    # (.venv): it holds installed packages only, and the worker cannot start without it.
    venv = os.path.realpath(sys.prefix)
    return sorted(p for p in paths
                  if p != "/" and (not _inside(p, str(KIT_ROOT)) or _inside(p, venv)))


def clean_env(settings: Settings, on_gpu: bool, home: Path, kit: Path) -> dict[str, str]:
    """The worker's whole environment: the variables settings.env lets through (names or
    shell patterns) and the kit's own."""
    env = {k: v for k, v in os.environ.items()
           if any(fnmatch.fnmatchcase(k, pattern) for pattern in settings.env)}
    outside = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
               if p and not _inside(os.path.realpath(p), str(KIT_ROOT))]
    env.update({
        # The staged kit first; then whatever the grading machine itself needs on the path.
        "PYTHONPATH": os.pathsep.join([str(kit), *outside]),
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "NNKIT_DEVICE": "gpu" if on_gpu else "sim",  # where the grader decided
    })
    env.setdefault("PATH", f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin")
    return env


class Sandbox:
    """One worker run: acquire a uid, prepare the folders, write the jail's spec; after the
    run, kill what is left and copy the results out.

        with Sandbox(settings, caps, workdir, on_gpu) as box:
            proc = subprocess.Popen(box.command(argv), cwd=..., env=box.env, ...)
            ...
            box.kill(proc)
            results = box.collect(outdir)
    """

    def __init__(self, settings: Settings, caps: Capabilities, workdir: Path, on_gpu: bool,
                 probing: bool = False):
        self.settings, self.caps, self.on_gpu, self.probing = settings, caps, on_gpu, probing
        self.workdir = Path(workdir).resolve()
        self.uid: int | None = None
        self._lock_fd: int | None = None
        self.private: Path | None = None
        self.env: dict[str, str] = {}

    # setting up ------------------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        self.private = Path(tempfile.mkdtemp(prefix="nnkit-job-"))  # the grader's only
        home = self.workdir
        (home / "tmp").mkdir(exist_ok=True)
        self.env = clean_env(self.settings, self.on_gpu, home, staged_kit())
        if self.caps.as_user:
            self.uid, self._lock_fd = acquire_uid(self.settings)
            kill_uid(self.uid)  # anything a crashed grader left under this uid
            for path in [self.workdir, *self.workdir.rglob("*")]:
                os.lchown(path, self.uid, self.uid)
            self.workdir.chmod(0o700)
            if not self.caps.mount:
                _let_through(self.workdir)
                if not self.probing:
                    close_kit()
        return self

    def limits(self) -> dict[str, int]:
        s, mb = self.settings, 1 << 20
        memory = s.memory_mb_gpu if self.on_gpu else s.memory_mb_simulator
        limits = {"CORE": 0}
        if memory and self.caps.memory_limit:
            limits["DATA" if self.on_gpu else "AS"] = memory * mb
        if s.processes:
            # Not a uid of its own: the user's other processes count against the limit too.
            base = 0 if self.caps.as_user else _tasks_of(os.getuid())
            limits["NPROC"] = base + s.processes
        if s.file_mb:
            limits["FSIZE"] = s.file_mb * mb
        return limits

    def _hidden(self, exposed: list[str]) -> list[list[str]]:
        hide = [[str(KIT_ROOT), "empty"], [tempfile.gettempdir(), "scratch"],
                ["/dev/shm", "scratch"], [os.getcwd(), "empty"],
                *[[p, "empty"] for p in self.settings.hide]]
        if self.caps.as_user:  # folders on the way to an exposed path that the uid cannot enter
            for path in exposed:
                for parent in reversed(Path(path).parents):
                    try:
                        mode = parent.stat().st_mode
                    except OSError:
                        break
                    if not mode & stat.S_IXOTH:
                        hide.append([str(parent), "empty"])
                        break
        hide = [[os.path.realpath(p), kind] for p, kind in hide if os.path.isdir(p)]
        return [h for h in hide if not any(_inside(system, h[0]) for system in SYSTEM)]

    def spec(self, argv: list[str], cwd: Path) -> dict:
        exposed = [*_python_paths(), str(staged_kit()), *self.settings.expose]
        data = default_dir().resolve()
        if data.is_dir():
            exposed.append(str(data))
        hidden = self._hidden(exposed + [str(self.workdir)])
        # Never bind back a folder that holds a hidden one (that would undo the hiding).
        expose = [[p, False] for p in exposed
                  if not any(_inside(h, os.path.realpath(p)) for h, _ in hidden)]
        expose.append([str(self.workdir), True])
        return {
            "namespaces": {"mount": self.caps.mount, "pid": self.caps.pid, "net": self.caps.net},
            "user_namespace": self.caps.user_namespace,
            "hide": hidden if self.caps.mount else [],
            "expose": expose if self.caps.mount else [],
            "scratch_mb": self.settings.scratch_mb or 64,
            "limits": self.limits(),
            "uid": self.uid, "gid": self.uid,
            "pidfile": str(self.private / "pid"),
            "cwd": str(cwd), "argv": argv, "env": self.env,
        }

    def command(self, argv: list[str], cwd: Path | None = None) -> list[str]:
        """The command that runs argv in the sandbox (through grader/jail.py)."""
        assert self.private is not None
        spec_file = self.private / "spec.json"
        (self.private / "pid").write_text("")
        spec_file.write_text(json.dumps(self.spec(argv, cwd or self.workdir)))
        return [sys.executable, "-I", "-S", str(JAIL), str(spec_file)]

    # tearing down ----------------------------------------------------------------------

    def kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL the job's process group, its PID namespace and every process of its uid:
        whatever it started, however it detached itself."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._kill_namespace()
        if self.uid is not None:
            kill_uid(self.uid)

    def _kill_namespace(self) -> None:
        try:
            pid_text, _, ns_id = (self.private / "pid").read_text().partition(" ")
            pid = int(pid_text)
            # Only the process heading the job's namespace: never a later one with its pid.
            if ns_id and os.readlink(f"/proc/{pid}/ns/pid") == ns_id.strip():
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, TypeError):
            pass

    def collect(self, outdir: Path, dest: Path) -> Path:
        """Copy the regular files of outdir into dest (created, the grader's own); call
        once every process of the job is dead."""
        dest.mkdir(parents=True)
        collect_files(outdir, dest, (self.settings.file_mb or 4096) << 20)
        return dest

    def __exit__(self, *exc) -> None:
        if self.uid is not None:
            kill_uid(self.uid)
        if self._lock_fd is not None:
            release_uid(self._lock_fd)
        if self.private is not None:
            shutil.rmtree(self.private, ignore_errors=True)


def collect_files(outdir: Path, dest: Path, max_bytes: int) -> None:
    """Regular files only, opened without following links and without blocking on a FIFO,
    at most max_bytes each; names with odd characters are skipped."""
    try:
        folder = os.open(outdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        for name in os.listdir(folder):
            if name.startswith(".") or not all(c.isalnum() or c in "-_." for c in name):
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
            except OSError:
                continue
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                os.close(fd)
                continue
            with os.fdopen(fd, "rb") as src, open(dest / name, "wb") as out:
                shutil.copyfileobj(src, out)
    finally:
        os.close(folder)


# What of the kit gives answers away: the solution, its history, the buggy copies of it,
# the tests' fragments of it, the grader's hidden checks and the reports.
PRIVATE = ("solution", ".git", "build", "examples", "tests", "grader", "grades")


def close_kit() -> None:
    """Without a mount namespace to hide the kit, take other users' access to its private
    parts away (the grader's own user keeps it); jobs import the staged copy instead."""
    for name in PRIVATE:
        path = KIT_ROOT / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if info.st_uid == os.geteuid() and stat.S_ISDIR(info.st_mode) and info.st_mode & 0o077:
            path.chmod(stat.S_IMODE(info.st_mode) & 0o700)


def _let_through(workdir: Path) -> None:
    """Without a mount namespace the job's uid must be able to walk to its folder: give
    the grader's own folders on the way search permission (not listing)."""
    for parent in workdir.parents:
        try:
            info = parent.stat()
        except OSError:
            return
        if info.st_uid == os.geteuid() and not info.st_mode & stat.S_IXOTH:
            parent.chmod(stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
