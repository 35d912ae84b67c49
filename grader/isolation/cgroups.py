"""A cgroup per job (as root, where the machine has them): memory and process limits that
hold the whole job, page cache and tmpfs included.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from grader.isolation.settings import Settings
from grader.isolation.uids import kill_until_gone

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


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


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
                if not hit or path is None or not inside(path, hit[0][0]):
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

    def freeze(self, on: bool) -> bool:
        """Stop every process of the job where it stands (on) or let them go on (v2's
        cgroup.freeze: a timed job of another submission is measuring the GPU). False
        where this group cannot (v1, or the write failed): the caller must not count on it."""
        if self.version != "v2" or not self.dirs:
            return False
        try:
            _write(self.dirs[0] / "cgroup.freeze", "1" if on else "0")
            return True
        except OSError:
            return False

    def frozen(self) -> bool:
        """Whether every process of the group has stopped (cgroup.events says so)."""
        if self.version != "v2" or not self.dirs:
            return False
        try:
            return "frozen 1" in (self.dirs[0] / "cgroup.events").read_text().splitlines()
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL everything in the group: at once where the kernel has cgroup.kill (v2,
        Linux 5.14), else one process at a time until none is left."""
        for folder in self.dirs:
            try:
                _write(folder / "cgroup.kill", "1")
            except OSError:
                pass
        kill_until_gone(self.pids)

    def remove(self) -> None:
        """Kill what is left and remove the group (a dying process keeps it busy briefly)."""
        self.freeze(False)
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
