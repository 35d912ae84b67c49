"""`make data`: fetch the four MNIST files and accept them only with the pinned SHA-256.

The source is MNIST_SRC (a folder or a base URL) when given, else the public mirrors in
order. A file already in place with the right checksum is kept; anything else is refused
and nothing unverified is left behind.
"""

from __future__ import annotations

import hashlib
import shutil
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
            partial.replace(final)
            return source
        except FetchError as err:
            problems.append(str(err))
        finally:
            partial.unlink(missing_ok=True)
    raise FetchError(f"could not obtain a genuine {name}:\n  " + "\n  ".join(problems))


def fetch_all(dest: Path, source: str | None = None) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    sources = [source] if source else list(MIRRORS)
    for name in SHA256:
        origin = fetch_file(name, dest, sources)
        print(f"{name}: ok ({origin})", file=sys.stderr)
