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

import fnmatch
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.isolation.cgroups import (  # noqa: F401
    CGROUP_SLACK_MB,
    JobCgroup,
    cgroup_support,
    inside,
)
from grader.isolation.settings import (  # noqa: F401
    DEVICE_LINKS,
    DEVICES,
    JAIL,
    ROOT_SYSTEM,
    SETUP_FAILED,
    SYSTEM,
    WORKER_MODULE,
    Capabilities,
    SandboxError,
    Settings,
    current,
    limits_text,
    use,
)
from grader.isolation.staging import (  # noqa: F401
    PRIVATE,
    close_kit,
    let_through,
    staged_kit,
    worker_imports_outside,
)
from grader.isolation.uids import acquire_uid, kill_uid, release_uid, tasks_of
from nnkit.mnist import default_dir
from nnkit.submission import KIT_ROOT

# One job (the settings, the probe, the staged kit, uids and cgroups are in sibling
# modules: settings.py, probe.py, staging.py, uids.py, cgroups.py)


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
                  if p != "/" and (not inside(p, str(KIT_ROOT)) or inside(p, venv)))


def clean_env(settings: Settings, on_gpu: bool, home: Path, kit: Path) -> dict[str, str]:
    """The worker's whole environment: the variables settings.env lets through (names or
    shell patterns) and the kit's own."""
    env = {k: v for k, v in os.environ.items()
           if any(fnmatch.fnmatchcase(k, pattern) for pattern in settings.env)}
    outside = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
               if p and not inside(os.path.realpath(p), str(KIT_ROOT))]
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
    if not on_gpu:
        # The simulator runs a thread per CUDA thread. glibc gives threads up to 8 malloc
        # arenas per core, 64 MB of address space each: on 16 cores that is 8 GB, past the
        # job's memory limit, and thread starts fail (on 2 cores, 1 GB, which fits).
        env["MALLOC_ARENA_MAX"] = "2"
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
                let_through(self.workdir)
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
            base = 0 if self.caps.as_user else tasks_of(os.getuid())
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
        return [h for h in hide if not any(inside(system, h[0]) for system in SYSTEM)]

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
        return [h for h in hide if not any(inside(system, h[0]) for system in SYSTEM)]

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
                          if p != "/" and not any(inside(p, c) for c in closed)]

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
                   if not any(inside(h, os.path.realpath(p)) for h, _ in private)]
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
                              if not any(inside(h, os.path.realpath(p)) for h, _ in hidden)]
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
