"""`make data`: fetch the four MNIST files and accept them only with the pinned SHA-256.

The source is MNIST_SRC (a folder or a base URL) when given, else the public mirrors in
order. A file already in place with the right checksum is kept; anything else is refused
and nothing unverified is left behind.

Every file written is readable by all (0644) and every folder made is 0755, whatever the
umask: the grader, run as root, gives the data to jobs that run under uids of their own,
and a 0600 file there would cost every student Part 2's training items.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from nnkit.mnist import SHA256

MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://yann.lecun.com/exdb/mnist/",
)


class FetchError(RuntimeError):
    """A file could not be obtained, or what was obtained is not the genuine file."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _is_url(source: str) -> bool:
    return "://" in source


def _copy_from(source: str, name: str, target: Path) -> None:
    """Put the file `name` from a folder or base URL at `target`."""
    if _is_url(source):
        url = source.rstrip("/") + "/" + name
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as out:
                shutil.copyfileobj(response, out)
        except (urllib.error.URLError, OSError) as err:
            raise FetchError(f"{url}: download failed ({err})") from None
    else:
        path = Path(source).expanduser() / name
        if not path.is_file():
            raise FetchError(f"{path}: no such file")
        shutil.copyfile(path, target)


def fetch_file(name: str, dest: Path, sources: list[str]) -> str:
    """Obtain one file into dest; return where it came from."""
    expected = SHA256[name]
    final = dest / name
    if final.is_file() and sha256_of(final) == expected:
        open_to_all(dest, names=[name])
        return "already present"
    problems = []
    for source in sources:
        with tempfile.NamedTemporaryFile(dir=dest, prefix=f".{name}.", delete=False) as tmp:
            partial = Path(tmp.name)
        try:
            _copy_from(source, name, partial)
            got = sha256_of(partial)
            if got != expected:
                raise FetchError(
                    f"{source}: {name} has SHA-256 {got}, expected {expected}; refusing it"
                )
            os.chmod(partial, FILE_MODE)  # mkstemp's 0600 otherwise
            partial.replace(final)
            return source
        except FetchError as err:
            problems.append(str(err))
        finally:
            partial.unlink(missing_ok=True)
    raise FetchError(f"could not obtain a genuine {name}:\n  " + "\n  ".join(problems))


FILE_MODE, DIR_MODE = 0o644, 0o755


def make_dirs(dest: Path) -> None:
    """dest and its missing parents, each 0755 whatever the umask."""
    dest = Path(dest)
    missing = [p for p in [dest, *dest.parents] if not p.exists()]
    dest.mkdir(parents=True, exist_ok=True)
    for path in missing:
        os.chmod(path, DIR_MODE)


def open_to_all(folder: Path, fix: bool = True, names: list[str] | None = None) -> list[str]:
    """Make the MNIST files in folder (and folder) readable by every user where this
    process owns them (with fix); return what stays unreadable by others, in words."""
    folder = Path(folder)
    problems = []
    wanted_names = SHA256 if names is None else names
    paths = [(folder, DIR_MODE)] + [(folder / n, FILE_MODE) for n in wanted_names]
    for path, wanted in paths:
        try:
            info = path.stat()
        except OSError:
            continue
        mode = stat.S_IMODE(info.st_mode)
        need = 0o005 if path.is_dir() else 0o004
        if mode & need == need:
            continue
        if fix and info.st_uid == os.geteuid():
            os.chmod(path, mode | (wanted & 0o555))
            print(f"{path}: made readable by all (mode {mode | (wanted & 0o555):04o}, was "
                  f"{mode:04o}): jobs run under uids of their own", file=sys.stderr)
        else:
            problems.append(
                f"{path}: mode {mode:04o}, owner uid {info.st_uid}: not readable by other "
                "users, so the jobs (run under uids of their own) cannot read it and Part 2's "
                f"training items will fail: run `chmod a+rX {folder}`")
    return problems


def fetch_all(dest: Path, source: str | None = None) -> None:
    make_dirs(dest)
    open_to_all(dest, names=[])
    sources = [source] if source else list(MIRRORS)
    for name in SHA256:
        origin = fetch_file(name, dest, sources)
        print(f"{name}: ok ({origin})", file=sys.stderr)
