"""The staged kit (what a job may import of the kit, nothing else) and, without a mount
namespace, the kit's private folders closed to other users.
"""

from __future__ import annotations

import ast
import atexit
import compileall
import importlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from nnkit.submission import KIT_ROOT

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
            # Compiled once here: jobs may not write bytecode, and each would otherwise
            # compile what it imports of the kit again (about 0.1 s of CPU per job).
            compileall.compile_dir(root, quiet=1)
            for path in [root, *root.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)
            _kit = root
        return _kit


# ---------------------------------------------------------------------------------------



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


def let_through(workdir: Path) -> None:
    """Without a mount namespace the job's uid must be able to walk to its folder: give
    the grader's own folders on the way search permission (not listing)."""
    for parent in workdir.parents:
        try:
            info = parent.stat()
        except OSError:
            return
        if info.st_uid == os.geteuid() and not info.st_mode & stat.S_IXOTH:
            parent.chmod(stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
