"""The sandbox's settings ([sandbox] of the config, set once per grading process) and what
the machine allows (Capabilities, probed by grader/isolation/probe.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

from grader.isolation.staging import PRIVATE

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
