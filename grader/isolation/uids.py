"""Uids of jobs: one per concurrent job, also across grading processes of one machine.
"""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from grader.isolation.settings import SandboxError, Settings

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


def kill_until_gone(processes: Callable[[], Iterable[int]], passes: int = 200) -> None:
    """SIGKILL every process `processes()` lists, again until it lists none (a fork bomb's
    children are killed on the next pass)."""
    for _ in range(passes):
        pids = list(processes())
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def kill_uid(uid: int) -> None:
    """SIGKILL every process of the uid until none is left."""
    kill_until_gone(lambda: _processes_of(uid))


def tasks_of(uid: int) -> int:
    """Processes and threads of a user (RLIMIT_NPROC counts them all)."""
    count = 0
    for pid in _processes_of(uid):
        try:
            count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            count += 1
    return count


# ---------------------------------------------------------------------------------------
