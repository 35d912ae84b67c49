"""Is the kit that is about to grade the kit that was released? (README, "nbgrader").

    python -m grader.isolation.integrity write FILE    # the kit's manifest as it is now
    python -m grader.isolation.integrity check FILE [--no-git]  # exit 1 if it changed

A manifest holds the SHA-256 of every file that decides a grade: the grader's and
nnkit's .py files, solution/ (what student results are compared with) and
grader/config.toml (the default points, limits and sandbox). `make release` writes one
into the course folder (COURSE/kit_manifest.json), and `make autograde` refuses to grade
when the kit differs from it: a file changed, missing, or added (an added
grader/worker_x.py would be staged into every job).

Where the kit is a git checkout, the same files are also compared with the commit
checked out (HEAD): a kit modified before the release, whose manifest would bless the
modification, is caught there unless the change was committed. A manifest kept inside
the kit proves nothing (whatever modifies the kit can rewrite it too), so there is none:
the references are the course's copy, a copy kept wherever the instructor chooses, and
git's objects. The git comparison hashes the files itself against `git ls-tree`, so that
no hook, filter or fsmonitor of the repository's configuration runs as the grader.

Nothing here can vouch for itself: the check runs in the code it checks, and the Python
installation, the packages and the bytecode caches are outside its scope.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from nnkit.submission import KIT_ROOT

COURSE_MANIFEST = "kit_manifest.json"  # in the course folder, written by release
VERSION = 1
TREES = ("grader", "nnkit", "solution")  # what git is asked about


class IntegrityError(RuntimeError):
    """The kit differs from its reference; .problems names each file."""

    def __init__(self, problems: list[str]):
        super().__init__("the kit is not the one released; refusing to grade:\n  "
                         + "\n  ".join(problems))
        self.problems = problems


def _in_scope(rel: str) -> bool:
    parts = rel.split("/")
    if "__pycache__" in parts or rel.endswith((".pyc", ".pyo")):
        return False
    if parts[0] in ("grader", "nnkit"):
        return rel.endswith(".py") or rel == "grader/config.toml"
    return parts[0] == "solution"


def kit_files(root: Path = KIT_ROOT) -> list[str]:
    """The kit's files that decide a grade, as paths relative to root (with '/')."""
    found = []
    for top in TREES:
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in filenames:
                rel = Path(dirpath, name).relative_to(root).as_posix()
                if _in_scope(rel):
                    found.append(rel)
    return sorted(found)


def _content(path: Path) -> bytes:
    """A file's bytes; a symlink's target text (never followed: where it points is the
    change)."""
    return os.readlink(path).encode() if path.is_symlink() else path.read_bytes()


def file_hash(path: Path) -> str:
    prefix = b"symlink:" if path.is_symlink() else b""
    return hashlib.sha256(prefix + _content(path)).hexdigest()


def compute(root: Path = KIT_ROOT) -> dict[str, str]:
    """path -> SHA-256 of every file in scope."""
    return {rel: file_hash(root / rel) for rel in kit_files(root)}


def write(path: Path, root: Path = KIT_ROOT) -> dict:
    """Write the manifest of the kit at root into path (made readable by its owner only:
    it is a reference, not for jobs); returns it."""
    manifest = {"version": VERSION, "kit": str(root), "git_commit": git_commit(root),
                "files": compute(root)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    path.chmod(0o600)
    return manifest


def compare(manifest: dict, root: Path = KIT_ROOT) -> list[str]:
    """What differs between the kit at root and a manifest, a line per file."""
    expected: dict[str, str] = manifest.get("files", {})
    current = compute(root)
    problems = [f"{rel}: changed since the manifest" for rel in sorted(expected)
                if rel in current and current[rel] != expected[rel]]
    problems += [f"{rel}: missing (in the manifest)" for rel in sorted(expected)
                 if rel not in current]
    problems += [f"{rel}: added (not in the manifest)" for rel in sorted(current)
                 if rel not in expected]
    return problems


# -- git ---------------------------------------------------------------------------------

def _git(root: Path, *args: str) -> str:
    # safe.directory: root grades a checkout that another user may own; core.fsmonitor off
    # so that no program named by the repository's config runs (ls-tree and rev-parse run
    # no hook or filter).
    result = subprocess.run(["git", "-c", f"safe.directory={root}", "-c", "core.fsmonitor=false",
                             "-C", str(root), *args], capture_output=True, timeout=60)
    if result.returncode != 0:
        raise OSError(result.stderr.decode(errors="replace").strip() or f"git {args[0]} failed")
    return result.stdout.decode(errors="surrogateescape")


def is_git_checkout(root: Path = KIT_ROOT) -> bool:
    try:
        top = _git(root, "rev-parse", "--show-toplevel").strip()
    except (OSError, subprocess.SubprocessError):
        return False
    # Only the kit's own repository: a kit unpacked inside some other one is not tracked.
    return Path(top).resolve() == Path(root).resolve()


def git_commit(root: Path = KIT_ROOT) -> str | None:
    if not is_git_checkout(root):
        return None
    try:
        return _git(root, "rev-parse", "HEAD").strip()
    except (OSError, subprocess.SubprocessError):
        return None


def git_changes(root: Path = KIT_ROOT) -> list[str]:
    """Files in scope that differ from HEAD (changed, missing or not committed); [] when
    root is not a git checkout."""
    if not is_git_checkout(root):
        return []
    try:
        algorithm = _git(root, "rev-parse", "--show-object-format").strip() or "sha1"
        listing = _git(root, "ls-tree", "-r", "-z", "HEAD", "--", *TREES)
    except (OSError, subprocess.SubprocessError) as err:
        return [f"git could not list HEAD ({err})"]
    committed: dict[str, tuple[str, str]] = {}
    for entry in filter(None, listing.split("\0")):
        meta, rel = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob" and _in_scope(rel):
            committed[rel] = (mode, blob)
    problems = []
    present = set(kit_files(root))
    for rel in sorted(committed):
        if rel not in present:
            problems.append(f"{rel}: missing (in git HEAD)")
            continue
        data = _content(root / rel)
        blob = hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest()
        if blob != committed[rel][1]:
            problems.append(f"{rel}: differs from git HEAD")
    problems += [f"{rel}: not in git HEAD" for rel in sorted(present - set(committed))]
    return problems


# -- checking ----------------------------------------------------------------------------

def verify(manifest_path: Path | None, root: Path = KIT_ROOT, git: bool = True) -> list[str]:
    """Every difference from the manifest (if given) and, with git=True in a git
    checkout, from HEAD; [] when the kit is intact."""
    problems = []
    if manifest_path is not None:
        try:
            manifest = json.loads(Path(manifest_path).read_text())
            if not (isinstance(manifest, dict) and manifest.get("version") == VERSION
                    and isinstance(manifest.get("files"), dict)):
                raise ValueError("not a kit manifest")
        except (OSError, ValueError) as err:
            problems.append(f"{manifest_path}: no readable manifest ({err})")
        else:
            problems += compare(manifest, root)
    if git:
        problems += git_changes(root)
    return problems


def require(manifest_path: Path | None, root: Path = KIT_ROOT, git: bool = True) -> None:
    """Raise IntegrityError, naming every changed file, unless the kit is intact."""
    problems = verify(manifest_path, root, git)
    if problems:
        raise IntegrityError(problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.isolation.integrity",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["write", "check"])
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--no-git", action="store_true",
                        help="check: compare with the manifest only, not with git HEAD")
    args = parser.parse_args(argv)
    if args.command == "write":
        manifest = write(args.manifest)
        print(f"wrote {args.manifest}: {len(manifest['files'])} files", file=sys.stderr)
        changes = git_changes()
        if changes:
            print("note: the manifest records a kit that differs from git HEAD:\n  "
                  + "\n  ".join(changes), file=sys.stderr)
        return 0
    problems = verify(args.manifest, git=not args.no_git)
    if problems:
        print(f"grader.isolation.integrity: {IntegrityError(problems)}", file=sys.stderr)
        return 1
    print(f"the kit matches {args.manifest}" + ("" if args.no_git else " and git HEAD"),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
