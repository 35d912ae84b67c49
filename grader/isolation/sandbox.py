"""Confining the worker that runs submitted code (README, "Security").

What a worker gets depends on what the machine allows, probed once per grading process
(`capabilities`), best first:

- the grader runs as root: each job runs under a uid of its own (one per concurrent job,
  from [sandbox] uid_first, no account needed; its gid has the same number) and, where
  the kernel allows, in new mount, PID, network, IPC and UTS namespaces (grader/isolation/jail.py),
  with a root of its own: an empty tmpfs into which only the system folders (/usr, /etc
  and the /bin, /lib links), the Python installation, the staged kit (nnkit and the
  grader modules the worker imports), the data, the config's exposed paths and the job's
  own folder are bound, read-only but for the last, beside private scratch /tmp and
  /dev/shm, a minimal /dev, a fresh /proc and a read-only /sys (an allow-list: other
  checkouts, /opt, /run, /var and home folders are simply absent). Where pivot_root fails,
  the old deny-list instead: the kit, the temp folder, the grader's working folder, home
  folders, /run/lock and the folders of [sandbox] hide are covered by empty mounts and
  what the worker needs is bound back. Either way the network has only loopback, System V
  IPC dies with the job, and the job's processes all die with its worker. Where the
  machine has cgroups (v2 with the memory and pids controllers, or v1's memory and pids
  hierarchies), each job also gets a cgroup of its own: memory (page cache, tmpfs and
  every process of the job together, no swap) and tasks are limited there, and whatever
  is left in it is killed when the job ends. Without namespaces, the uid alone keeps the
  job out of other jobs' folders and of anything not readable by all, and every process
  of the uid is killed when the job ends;
- not root: the same namespaces inside an unprivileged user namespace, where the system
  allows one; the job runs as the grader's own user (no cgroup);
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
import errno
import fcntl
import fnmatch
import importlib
import itertools
import json
import os
import re
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
# What of the system a job's new root holds: the programs and libraries (with the GPU's
# driver libraries, wherever the distribution puts them under /usr or /lib) and all of
# /etc, read-only. /etc is whole on purpose: the loader's cache, the alternatives links
# that /usr/bin/mpiexec and BLAS go through, nsswitch and hosts for Hydra's name lookups
# and the GPU's configuration are all there, and its files readable by all are the
# machine's configuration, never the course's; a curated list would break on the next
# distribution. Nothing under /run, /var, /opt, /srv, /home or /root is in it.
ROOT_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
                "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}


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
    namespaces: bool = True  # False: never try mount, PID, network, IPC or UTS namespaces
    cgroups: bool = True  # False: never put jobs in cgroups of their own (rlimits only)
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
    ipc: bool = False  # System V IPC and POSIX message queues of the job's own
    uts: bool = False
    root: bool = False  # a new root holding only what the job needs (else a deny-list)
    cgroup: str = ""  # "v2" or "v1": a cgroup per job; "": rlimits only
    cgroup_note: str = ""  # why there is none, when there is none
    memory_limit: bool = True  # False: CUDA did not start under the memory limit
    note: str = ""  # why the first choice did not work, when it did not

    def describe(self, settings: Settings) -> str:
        names = [n for n, on in (("mount", self.mount), ("PID", self.pid), ("network", self.net),
                                 ("IPC", self.ipc), ("UTS", self.uts)) if on]
        where = (f" in new {', '.join(names[:-1]) + ' and ' * (len(names) > 1) + names[-1]} "
                 f"namespace{'s' * (len(names) > 1)}" if names else "")
        if self.as_user:
            last = settings.uid_first + settings.uid_count - 1
            who = f"run as uids {settings.uid_first}-{last}{where}"
        elif os.geteuid() == 0:
            who = "run as root, unconfined (no uid of their own could be used)"
        else:
            who = f"run as this user{where}"
        if self.root:
            hidden = ("; each in a new root (allow-list) holding only the system folders, the "
                      "Python installation, the staged kit, the data and its own folder")
        elif self.mount:
            hidden = ("; the kit, the temp folder and home folders are hidden (deny-list: "
                      "other folders stay visible)")
        elif self.as_user:
            hidden = "; the kit's " + ", ".join(PRIVATE) + " are closed to other users"
        else:
            hidden = ""
        if self.cgroup:
            group = (f"; a cgroup {self.cgroup} per job holds the whole job to the memory and "
                     "process limits (tmpfs and page cache included, no swap)")
        elif self.as_user:
            group = f"; no cgroup ({self.cgroup_note or 'not tried'}): rlimits only"
        else:
            group = ""
        note = f" ({self.note})" if self.note else ""
        limits = limits_text(settings) + ("" if self.memory_limit else
                                          " (no memory limit: CUDA did not start under it)")
        return f"workers {who}{hidden}{group}; limits: {limits}{note}"


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
    every = dict(mount=True, pid=True, net=net, ipc=True, uts=True)
    # Best first: the allow-list root; the deny-list where pivot_root fails; then fewer
    # namespaces, as the kernel allows.
    full = [dict(every, root=True), every, dict(mount=True, pid=True, net=net),
            dict(mount=True, pid=True), dict(mount=True), dict()
            ] if settings.namespaces else [dict()]
    if os.geteuid() == 0:
        group, why = cgroup_support(settings)
        chosen = [Capabilities(as_user=True, cgroup=group, cgroup_note=why, **c) for c in full]
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


GRADER_PACKAGE = Path(__file__).resolve().parents[1]
WORKER_PACKAGE = GRADER_PACKAGE / "worker"


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
            # The instructors' kit carries solution markers in nnkit (Part 3's twins); the
            # student kit ships them stubbed already, and without stubgen.
            try:
                stubgen = importlib.import_module("grader.course.stubgen")
            except ImportError:
                stubgen = None
            root = Path(tempfile.mkdtemp(prefix="nnkit-kit-"))
            atexit.register(shutil.rmtree, root, True)
            skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
            shutil.copytree(KIT_ROOT / "nnkit", root / "nnkit", ignore=skip)
            for path in (root / "nnkit").rglob("*.py") if stubgen else ():
                text = path.read_text()
                if stubgen.BEGIN in text:
                    path.write_text(stubgen.stub_source(text, str(path)))
            (root / "grader").mkdir()
            shutil.copy(GRADER_PACKAGE / "__init__.py", root / "grader")
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
# A cgroup per job (as root, where the machine has them)
#
# v2: a group `nnkit` at the top of the cgroup2 mount (a group with processes in it cannot
# hand controllers down, so the grader's own group will not do), one child per job. v1
# (hybrid machines): a child of the grader's own group in the memory and in the pids
# hierarchy. A job's group is named <grader pid>-<n>; a dead grader's are removed.

CGROUP_CONTROLLERS = ("memory", "pids")
# The group's memory limit is the job's rlimit plus this: the kernel charges the group
# more than a process's address space holds (page tables, kernel stacks of its threads,
# files it read), and a lone process over its limit should get its MemoryError from the
# rlimit, not be killed by the group (nor slowed first, its own libraries evicted).
CGROUP_SLACK_MB = 512
_cgroup_seq = itertools.count()
_cgroup_base: tuple[str, list[Path]] | None = None
_cgroup_lock = threading.Lock()


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _cgroup_mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root in the hierarchy, mount point, fstype, options) of the cgroup mounts."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                found.append((_unescape(fields[3]), _unescape(fields[4]), rest[0],
                              set(rest[2].split(","))))
    return found


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _sweep(base: Path) -> None:
    """Remove the groups of graders that died without removing their own."""
    for group in base.iterdir():
        pid, _, seq = group.name.partition("-")
        if not (group.is_dir() and pid.isdigit() and seq.isdigit()):
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its grader lives (or a process with its pid: leave it alone)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        JobCgroup("", [group]).remove()


def _cgroup_bases() -> tuple[str, list[Path]]:
    """("v2" | "v1", the folders that hold the jobs' groups); OSError where neither works."""
    global _cgroup_base
    with _cgroup_lock:
        if _cgroup_base is not None:
            return _cgroup_base
        mounts, why = _cgroup_mounts(), []
        for _, point, fstype, _ in mounts:
            if fstype != "cgroup2":
                continue
            top = Path(point)
            have = set((top / "cgroup.controllers").read_text().split())
            if not set(CGROUP_CONTROLLERS) <= have:
                missing = " and ".join(sorted(set(CGROUP_CONTROLLERS) - have))
                why.append(f"cgroup2 at {point} lacks {missing}")
                continue
            base = top / "nnkit"
            base.mkdir(exist_ok=True)
            for folder in (top, base):  # each level hands the controllers down
                on = set((folder / "cgroup.subtree_control").read_text().split())
                if not set(CGROUP_CONTROLLERS) <= on:
                    _write(folder / "cgroup.subtree_control",
                           " ".join(f"+{c}" for c in CGROUP_CONTROLLERS))
            _cgroup_base = ("v2", [base])
            break
        else:
            own = {}
            with open("/proc/self/cgroup") as f:
                for line in f:
                    _, names, path = line.rstrip("\n").split(":", 2)
                    for name in names.split(","):
                        own[name] = path
            bases = []
            for controller in CGROUP_CONTROLLERS:
                hit = [(root, point) for root, point, fstype, options in mounts
                       if fstype == "cgroup" and controller in options]
                path = own.get(controller)
                if not hit or path is None or not _inside(path, hit[0][0]):
                    why.append(f"no cgroup v1 {controller} hierarchy of this process")
                    break
                root, point = hit[0]
                base = Path(point, os.path.relpath(path, root)) / "nnkit"
                base.mkdir(exist_ok=True)
                bases.append(base)
            else:
                _cgroup_base = ("v1", bases)
            if _cgroup_base is None:
                raise OSError(errno.ENOENT, "; ".join(why) or "no cgroup file system")
        for base in _cgroup_base[1]:
            _sweep(base)
        return _cgroup_base


class JobCgroup:
    """The cgroup(s) of one job: created with its limits before the job starts (the jail
    puts itself in them before anything else), killed and removed after it."""

    def __init__(self, version: str, dirs: list[Path]):
        self.version, self.dirs = version, dirs

    @classmethod
    def create(cls, memory_mb: int, tasks: int) -> JobCgroup:
        version, bases = _cgroup_bases()
        name = f"{os.getpid()}-{next(_cgroup_seq)}"
        group = cls(version, [])
        try:
            for base in bases:
                (base / name).mkdir()
                group.dirs.append(base / name)
            memory = str(memory_mb << 20) if memory_mb else "max"
            if version == "v2":
                folder = group.dirs[0]
                _write(folder / "memory.max", memory)
                for knob, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if (folder / knob).exists():  # no swap, and an OOM kill takes the whole job
                        _write(folder / knob, value)
                _write(folder / "pids.max", str(tasks) if tasks else "max")
            else:
                memory = memory if memory_mb else "-1"
                _write(group.dirs[0] / "memory.limit_in_bytes", memory)
                if (group.dirs[0] / "memory.memsw.limit_in_bytes").exists():
                    _write(group.dirs[0] / "memory.memsw.limit_in_bytes", memory)
                _write(group.dirs[1] / "pids.max", str(tasks) if tasks else "max")
        except OSError:
            group.remove()
            raise
        return group

    @property
    def procs(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found = set()
        for path in self.procs:
            try:
                found |= {int(p) for p in Path(path).read_text().split()}
            except (OSError, ValueError):
                pass
        return found

    def kill(self) -> None:
        """SIGKILL everything in the group: at once where the kernel has cgroup.kill (v2,
        Linux 5.14), else one process at a time until none is left."""
        for folder in self.dirs:
            try:
                _write(folder / "cgroup.kill", "1")
            except OSError:
                pass
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and remove the group (a dying process keeps it busy briefly)."""
        self.kill()
        for folder in reversed(self.dirs):
            for _ in range(300):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY:
                        break
                    self.kill()
                    time.sleep(0.01)
        self.dirs = []


_cgroup_probed: list[tuple[str, str]] = []
_cgroup_probe_lock = threading.Lock()
JOIN = "import os, sys\nfor p in sys.argv[1:]:\n    open(p, 'w').write(str(os.getpid()))"


def cgroup_support(settings: Settings) -> tuple[str, str]:
    """("v2" | "v1", "") where a job's cgroup can be made, limited and joined here (tried
    with a process of its own); else ("", why not)."""
    if not settings.cgroups:
        return "", "[sandbox] cgroups is false"
    if os.geteuid() != 0:
        return "", "not root"
    with _cgroup_probe_lock:
        if not _cgroup_probed:
            _cgroup_probed.append(_try_cgroup())
        return _cgroup_probed[0]


def _try_cgroup() -> tuple[str, str]:
    try:
        group = JobCgroup.create(64, 16)
    except OSError as err:
        return "", f"none can be made here: {err.strerror or err}"
    try:
        joined = subprocess.run([sys.executable, "-I", "-S", "-c", JOIN, *group.procs],
                                capture_output=True, text=True, timeout=60)
        if joined.returncode != 0:
            lines = joined.stderr.strip().splitlines() or ["no reason given"]
            return "", f"a process could not join one: {lines[-1]}"
        return group.version, ""
    except (OSError, subprocess.SubprocessError) as err:
        return "", f"a process could not join one: {err}"
    finally:
        group.remove()


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
        self.cgroup: JobCgroup | None = None
        self.env: dict[str, str] = {}

    # setting up ------------------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        try:
            self._set_up()
        except BaseException:
            self.__exit__(None, None, None)  # never left half made: no __exit__ otherwise
            raise
        return self

    def _set_up(self) -> None:
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
        if self.caps.cgroup:
            s = self.settings
            memory = s.memory_mb_gpu if self.on_gpu else s.memory_mb_simulator
            try:
                self.cgroup = JobCgroup.create(memory and memory + CGROUP_SLACK_MB, s.processes)
            except OSError as err:  # worked when probed: say so, and run on rlimits alone
                print(f"sandbox: a job runs without its cgroup: {err}", file=sys.stderr)

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

    def _private_folders(self) -> list[list[str]]:
        """Folders no job may see: the kit, the temp folder (a private scratch instead),
        the grader's working folder and [sandbox] hide; never a system folder."""
        hide = [[str(KIT_ROOT), "empty"], [tempfile.gettempdir(), "scratch"],
                [os.getcwd(), "empty"], *[[p, "empty"] for p in self.settings.hide]]
        hide = [[os.path.realpath(p), kind] for p, kind in hide if os.path.isdir(p)]
        return [h for h in hide if not any(_inside(system, h[0]) for system in SYSTEM)]

    def _hidden(self, exposed: list[str]) -> list[list[str]]:
        """The deny-list: what the jail covers (the private folders, /dev/shm and /run/lock,
        the machine's shared scratch, made private)."""
        hide = self._private_folders() + [
            [os.path.realpath(p), "scratch"] for p in ("/dev/shm", "/run/lock")
            if os.path.isdir(p)]
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
        return [h for h in hide if not any(_inside(system, h[0]) for system in SYSTEM)]

    def _exposed(self, argv: list[str]) -> list[str]:
        """What the worker needs beside the system: the Python installation, the staged kit,
        the data, the config's expose, the launcher's installation (mpiexec,
        compute-sanitizer) and the library folders its environment names."""
        exposed = [*_python_paths(), str(staged_kit()), *self.settings.expose]
        data = default_dir().resolve()
        if data.is_dir():
            exposed.append(str(data))
        found = []
        if argv and os.path.isabs(argv[0]) and argv[0] != sys.executable:
            found.append(os.path.dirname(os.path.dirname(os.path.realpath(argv[0]))))
        for name in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"):
            found += [os.path.realpath(p) for p in self.env.get(name, "").split(os.pathsep)
                      if os.path.isabs(p) and os.path.isdir(p)]
        # Never a part of the kit, of the temp folder (other jobs) or of the grader's folder.
        closed = [str(KIT_ROOT), os.path.realpath(tempfile.gettempdir()), os.getcwd()]
        return exposed + [p for p in found
                          if p != "/" and not any(_inside(p, c) for c in closed)]

    def _root_mounts(self, exposed: list[str]) -> list[list]:
        """The allow-list: the job's new root, for grader/isolation/jail.py (enter_new_root)."""
        mounts: list[list] = [[p, "ro"] for p in ROOT_SYSTEM]
        mounts += [[p, "ro"] for p in exposed]
        # A private folder inside a system folder (say, the kit under /usr/src) is covered.
        mounts += self._private_folders()
        mounts += [["/tmp", "scratch"], ["/dev", "dir"], ["/dev/shm", "scratch"]]
        mounts += [[f"/dev/{d}", "dev"] for d in DEVICES]
        mounts += [[f"/dev/{name}", "link", target] for name, target in DEVICE_LINKS.items()]
        if self.on_gpu:  # the driver's devices (nvidia0..., nvidiactl, nvidia-uvm, caps/)
            mounts += [[str(p), "dev"] for p in sorted(Path("/dev").glob("nvidia*"))]
        mounts.append([str(self.workdir), "rw"])
        return mounts

    def spec(self, argv: list[str], cwd: Path) -> dict:
        exposed = self._exposed(argv)
        private = self._private_folders()
        # Never show a folder that holds a private one (that would undo the hiding).
        exposed = [p for p in exposed
                   if not any(_inside(h, os.path.realpath(p)) for h, _ in private)]
        spec = {
            "namespaces": {"mount": self.caps.mount, "pid": self.caps.pid, "net": self.caps.net,
                           "ipc": self.caps.ipc, "uts": self.caps.uts},
            "user_namespace": self.caps.user_namespace,
            "scratch_mb": self.settings.scratch_mb or 64,
            "limits": self.limits(),
            "uid": self.uid, "gid": self.uid,
            "pidfile": str(self.private / "pid"),
            "cgroup": self.cgroup.procs if self.cgroup else [],
            "cwd": str(cwd), "argv": argv, "env": self.env,
        }
        if self.caps.root:
            new_root = self.private / "root"
            new_root.mkdir(mode=0o700, exist_ok=True)
            spec["root"] = {"path": str(new_root), "mounts": self._root_mounts(exposed)}
        elif self.caps.mount:
            hidden = self._hidden(exposed + [str(self.workdir)])
            spec["hide"] = hidden
            spec["expose"] = [[p, False] for p in exposed
                              if not any(_inside(h, os.path.realpath(p)) for h, _ in hidden)]
            spec["expose"].append([str(self.workdir), True])
        return spec

    def command(self, argv: list[str], cwd: Path | None = None) -> list[str]:
        """The command that runs argv in the sandbox (through grader/isolation/jail.py)."""
        assert self.private is not None
        spec_file = self.private / "spec.json"
        (self.private / "pid").write_text("")
        spec_file.write_text(json.dumps(self.spec(argv, cwd or self.workdir)))
        return [sys.executable, "-I", "-S", str(JAIL), str(spec_file)]

    # tearing down ----------------------------------------------------------------------

    def kill(self, proc: subprocess.Popen | None = None) -> None:
        """SIGKILL the job's process group, its PID namespace, its cgroup and every process
        of its uid: whatever it started, however it detached itself. Safe to call again,
        and from another thread (a grader stopping on a signal)."""
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._kill_namespace()
        cgroup = self.cgroup
        if cgroup is not None:
            cgroup.kill()
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
        """Kill what is left and give everything back, each step whatever the last did."""
        try:
            self._kill_namespace()
            if self.uid is not None:
                kill_uid(self.uid)
        finally:
            try:
                cgroup, self.cgroup = self.cgroup, None
                if cgroup is not None:
                    cgroup.remove()
            finally:
                if self._lock_fd is not None:
                    release_uid(self._lock_fd)
                    self._lock_fd = None
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
