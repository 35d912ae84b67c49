"""Entering a worker's sandbox: `python -I -S grader/jail.py SPEC.json` (standard library only).

grader/sandbox.py writes the spec and starts this script, which then, in order:

1. leaves the grader's mount, PID and network namespaces (those the spec names). Not as
   root, it first enters a user namespace of its own, where it may do the same;
2. hides folders behind empty tmpfs mounts (read-only, or a private writable scratch for
   /tmp and /dev/shm) and binds back, read-only or writable, the paths the worker needs
   (the Python installation, the staged kit, the job's own folder);
3. forks when there is a PID namespace: the child is its process 1, so that every process
   the submission starts dies with the worker, however it detaches itself;
4. brings the loopback interface up, sets the resource limits, drops to the job's uid and
   gid (as root), forbids gaining privileges again and execs the worker.

Nothing here runs submitted code, and the spec is read before any privilege is dropped.
A setup step that fails ends the script with status 125 and a line on stderr.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import signal
import socket
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
SETUP_FAILED = 125
RLIMITS = {"AS": resource.RLIMIT_AS, "DATA": resource.RLIMIT_DATA,
           "NPROC": resource.RLIMIT_NPROC, "FSIZE": resource.RLIMIT_FSIZE,
           "CORE": resource.RLIMIT_CORE}

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(RuntimeError):
    pass


def _call(what: str, ret: int) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _enc(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    _call(f"mount {target}", _libc.mount(_enc(source), _enc(target), _enc(fstype),
                                         ctypes.c_ulong(flags), _enc(data)))


def unshare(flags: int) -> None:
    _call("unshare", _libc.unshare(ctypes.c_int(flags)))


def prctl(option: int, value: int) -> None:
    _call("prctl", _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0),
                               ctypes.c_ulong(0), ctypes.c_ulong(0)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def enter_user_namespace() -> None:
    """Not root: a user namespace in which this user keeps its own uid and gid but may
    create the other namespaces. Its powers end at exec, as the uid is not 0 there."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def hide_and_expose(hide: list[list], expose: list[list], scratch_mb: int,
                    strict: bool = True) -> None:
    """Cover each hidden folder with a tmpfs, then bind the exposed paths back in place.

    hide: [path, "empty" | "scratch"]; expose: [path, writable]. Exposed paths are opened
    before anything is covered, and bound from those descriptors. Not strict (in a user
    namespace, where the job runs as the grader's own user anyway), a bind that cannot be
    made read-only stays writable."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here leaks out
    handles = []
    for path, writable in sorted(expose, key=lambda e: len(e[0])):
        if os.path.lexists(path):
            handles.append((path, bool(writable), os.open(path, os.O_PATH | os.O_CLOEXEC)))
    roots: list[tuple[str, str]] = []
    for path, kind in sorted(hide, key=lambda h: len(h[0])):
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        if any(_inside(path, r) for r, _ in roots):
            continue
        if kind == "scratch":
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={scratch_mb}m")
        else:
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
        roots.append((path, kind))
    bound: list[tuple[str, bool]] = []
    for path, writable, fd in handles:
        if not any(_inside(path, r) for r, _ in roots):
            continue  # never covered: already visible as it is
        if any(_inside(path, b) and w == writable for b, w in bound):
            continue  # already visible through a folder bound before it
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, mode=0o755, exist_ok=True)
        elif not os.path.lexists(path):
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            open(path, "a").close()
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        if not writable:
            # A remount must keep the flags the mount already has (a user namespace locks them).
            kept = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048)
            try:
                mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)
            except SetupError:
                if strict:
                    raise
        bound.append((path, writable))
        os.close(fd)
    for path, kind in roots:
        if kind != "scratch":
            mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  "mode=755,size=1m")


def loopback_up() -> None:
    """A new network namespace has only `lo`, and it is down; local sockets (MPI's, for
    one) need it up."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def set_limits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        value = int(value)
        resource.setrlimit(RLIMITS[name], (value, value))


def drop_privileges(uid: int | None, gid: int | None) -> None:
    if uid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid program can give the privileges back


def _finish(spec: dict, new_pid: bool) -> None:
    """In the process that becomes the worker: the last steps, then exec."""
    if new_pid and spec["namespaces"].get("mount"):
        try:  # a /proc of the new PID namespace: the job sees its own processes only
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except SetupError:
            pass
    if spec["namespaces"].get("net"):
        loopback_up()
    set_limits(spec.get("limits", {}))
    drop_privileges(spec.get("uid"), spec.get("gid"))
    if new_pid:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    os.umask(0o077)
    os.chdir(spec["cwd"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


def run(spec: dict) -> int:
    ns = spec["namespaces"]
    flags = ((CLONE_NEWNS if ns.get("mount") else 0) | (CLONE_NEWPID if ns.get("pid") else 0)
             | (CLONE_NEWNET if ns.get("net") else 0))
    # Opened before any folder is covered: the grader reads it from outside.
    pidfile = os.open(spec["pidfile"], os.O_WRONLY | os.O_CLOEXEC) if spec.get("pidfile") else None
    if flags and spec.get("user_namespace"):
        enter_user_namespace()
    if flags:
        unshare(flags)
    if ns.get("mount"):
        hide_and_expose(spec.get("hide", []), spec.get("expose", []), spec.get("scratch_mb", 64),
                        strict=not spec.get("user_namespace"))
    if not ns.get("pid"):
        _finish(spec, new_pid=False)
    child = os.fork()
    if child == 0:
        try:
            _finish(spec, new_pid=True)
        except BaseException as err:  # noqa: BLE001 - report and leave with the setup status
            print(f"sandbox: {err}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    if pidfile is not None:  # the namespace's process 1, and which namespace it heads
        try:
            ns_id = os.readlink("/proc/self/ns/pid_for_children")
        except OSError:
            ns_id = ""
        os.write(pidfile, f"{child} {ns_id}".encode())
        os.close(pidfile)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):  # end the same way, so that the grader sees the signal
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        spec = json.load(f)
    try:
        return run(spec)
    except (SetupError, OSError) as err:
        print(f"sandbox: {err}", file=sys.stderr, flush=True)
        return SETUP_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
