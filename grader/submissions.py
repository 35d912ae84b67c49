"""What is graded: the submissions named on the command line, and the private copy of a
submission that each job runs from.

A job gets only what it needs: the regular `.py` files at the top level of the
submission, at most MAX_FILES of them, each at most MAX_FILE_BYTES and MAX_TOTAL_BYTES in
all. Anything else there (folders, symlinks, FIFOs, sockets, devices, other files, files
over the caps) is left out and listed in a note that reaches the feedback as information:
it costs no point by itself (a module left out is then missing, and its items say so).

Paths given to the grader (`resolve`):

- a folder holding student modules is one submission;
- a folder holding no student module but two or more sub-folders that do (a class's
  folder given by mistake, or on purpose) is graded as one submission per sub-folder
  (hidden ones and `__pycache__` left out), with a note; with a single such sub-folder it
  is a student's own folder with the modules one level too deep: graded as it is (so
  the row keeps the student's name), with a note saying where the modules are. In a
  class's folder, the other entries a student's work may be are not dropped unseen: a
  notebook is graded as a notebook, and a symbolic link, an archive or a special file
  gets a row graded zero saying why; other files (a README) are named on stderr;
- a submission that is a symbolic link is never followed (graded zero, saying so): it
  could name any folder the grader may read, the solution or another student's
  (an archive unpacked into the class's folder can hold such a link);
- a notebook (`.ipynb`) becomes the folder of the modules its tagged cells hold, provided
  it is a regular file of at most nbextract.NOTEBOOK_BYTES (a FIFO or a device is never opened);
- a path that does not exist, or is neither, is graded zero with a message saying so:
  the rest of the class is graded, and the grader's exit status says something was wrong.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from grader import cellmap, safe_io
from grader.results import NESTED_NOTE

MAX_FILES = 64
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 8 << 20
LISTED = 3  # entries named in a note per reason; the rest are counted
OTHER = "file(s) other than .py"


@dataclass
class Manifest:
    """What of a submission folder a job gets (`files`) and what it does not (`skipped`:
    per reason, how many entries and the first LISTED names)."""

    files: list[str] = field(default_factory=list)
    skipped: dict[str, tuple[int, list[str]]] = field(default_factory=dict)

    def skip(self, name: str, why: str) -> None:
        count, names = self.skipped.get(why, (0, []))
        if len(names) < LISTED:
            names.append(name)
        self.skipped[why] = (count + 1, names)

    @property
    def skipped_count(self) -> int:
        return sum(count for count, _ in self.skipped.values())

    def note(self) -> str | None:
        """The entries left out in words, for the feedback; None when there are none."""
        if not self.skipped:
            return None
        parts = []
        for why, (count, names) in self.skipped.items():
            shown = ", ".join(safe_io.clean_text(n, 80) for n in names)
            more = f" and {count - len(names):,} more" if count > len(names) else ""
            parts.append(f"{count:,} {why} ({shown}{more})")
        return (f"not copied for grading (jobs get only regular .py files at the top level, "
                f"at most {MAX_FILES} of at most {MAX_FILE_BYTES >> 20} MiB each, "
                f"{MAX_TOTAL_BYTES >> 20} MiB in all): " + "; ".join(parts))


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symbolic link(s)"
    if stat.S_ISDIR(mode):
        return "folder(s)"
    if stat.S_ISFIFO(mode):
        return "FIFO(s)"
    if stat.S_ISSOCK(mode):
        return "socket(s)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device(s)"
    return "special file(s)"


def survey(src: Path) -> Manifest:
    """Which entries of the folder src a job gets, without reading any of them."""
    manifest = Manifest()
    total = 0
    modules = {f"{m}.py" for m in student_modules()}
    with os.scandir(src) as entries:  # the student modules first: never crowded out
        found = sorted(entries, key=lambda e: (e.name not in modules, e.name))
    for entry in found:
        name = entry.name
        if name.startswith(".") or name == "__pycache__":
            continue  # editors' and Python's own files: not worth a note
        if not name.endswith(".py") and entry.is_file(follow_symlinks=False):
            manifest.skip(name, OTHER)  # d_type says so: no system call per entry
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            manifest.skip(name, "unreadable entr(y/ies)")
            continue
        if not stat.S_ISREG(info.st_mode):
            manifest.skip(name, _kind(info.st_mode))
        elif not name.endswith(".py"):
            manifest.skip(name, OTHER)
        elif info.st_size > MAX_FILE_BYTES:
            manifest.skip(name, f".py file(s) over {MAX_FILE_BYTES >> 20} MiB")
        elif not os.access(entry.path, os.R_OK):
            # (without a note the module would be "missing" though the student sees it)
            manifest.skip(name, ".py file(s) the grader may not read (permissions)")
        elif len(manifest.files) >= MAX_FILES:
            manifest.skip(name, f".py file(s) beyond the first {MAX_FILES}")
        elif total + info.st_size > MAX_TOTAL_BYTES:
            manifest.skip(name, f".py file(s) beyond {MAX_TOTAL_BYTES >> 20} MiB in all")
        else:
            total += info.st_size
            manifest.files.append(name)
    return manifest


_surveys: dict[str, tuple[int, Manifest]] = {}
_surveys_lock = threading.Lock()


def manifest_of(src: Path) -> Manifest:
    """survey(src), remembered while the folder does not change (every task of a
    submission copies it; a folder of 100,000 files is listed once)."""
    key = os.fspath(Path(src).resolve())
    changed = os.stat(key).st_mtime_ns
    with _surveys_lock:
        known = _surveys.get(key)
    if known and known[0] == changed:
        return known[1]
    manifest = survey(Path(key))
    with _surveys_lock:
        _surveys[key] = (changed, manifest)
    return manifest


def copy_submission(src: Path, dest: Path) -> Path:
    """A private working copy of the submission's top-level regular .py files, within the
    caps (see the module docstring); returns dest, which must not exist yet."""
    manifest = manifest_of(src)
    dest = Path(dest)
    dest.mkdir(parents=True)
    for name in manifest.files:
        try:  # opened again as a regular file: it may have changed since the survey
            data = safe_io.read_bytes(Path(src) / name, MAX_FILE_BYTES)
        except (OSError, ValueError):
            continue
        (dest / name).write_bytes(data)
    return dest


# ---------------------------------------------------------------------------------------
# Submissions named on the command line


@dataclass
class Submission:
    name: str  # the folder's (or notebook's) own name; unique within a run
    folder: Path | None  # None: nothing to grade, `problem` says why
    problem: str | None = None  # graded zero with this message
    notes: list[str] = field(default_factory=list)  # information for the feedback
    # May the record beside the folder (grader/cellmap.py) be read? Not for a sub-folder
    # of a handed-in folder, whose parent the student fills.
    cell_map: bool = True
    # The notebook handed in, for a folder the grader extracted from one: what the report
    # names as its path, the same in every run (the folder is new each time, and a class
    # regraded into the same --out forked a row a run: carol, carol_, carol__).
    source: Path | None = None

    @property
    def report_path(self) -> Path | None:
        """What its report names as the path graded: the notebook, or the folder."""
        return self.source or self.folder


def is_nested(sub: Submission) -> bool:
    """Was this submission a sub-folder of a folder named on the command line?"""
    return any(n.startswith(NESTED_NOTE) for n in sub.notes)


def student_modules() -> set[str]:
    from grader.nbextract import MODULES

    return set(MODULES)


def holds_modules(folder: Path) -> bool:
    return any(os.path.lexists(folder / f"{m}.py") for m in student_modules())


def _subfolders(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            subs = [Path(e.path) for e in entries
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                    and e.name != "__pycache__"]
    except OSError:
        return []
    return sorted(subs)


ARCHIVES = (".zip", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".zst", ".7z", ".rar")


LINKED = ("{shown}: a symbolic link, not followed (it could name any folder the grader "
          "may read): nothing was graded; copy the submission itself there")


def not_graded(path: Path, shown: str) -> str:
    """Why a path that is not a folder or notebook to grade is graded zero."""
    name = path.name.lower()
    if os.path.islink(path) and not os.path.exists(path):
        return f"{shown}: a symbolic link to nothing (or a loop of links): nothing was graded"
    if os.path.islink(path):
        return LINKED.format(shown=shown)
    if name.endswith(ARCHIVES):
        return (f"{shown}: an archive, not a folder of modules: unpack it (the grader opens "
                "no archive) and grade the folder; nothing was graded")
    return f"{shown}: neither a folder of modules nor a notebook: nothing was graded"


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _class_entries(folder: Path, subs: list[Path], notebooks: Path) -> list[Submission]:
    """What a class's folder holds besides its plain sub-folders (see the module
    docstring): never an entry dropped without a word."""
    try:
        with os.scandir(folder) as entries:
            others = sorted(Path(e.path) for e in entries if not e.name.startswith(".")
                            and e.name != "__pycache__" and Path(e.path) not in subs)
    except OSError:
        return []
    shown = safe_io.clean_text(os.fspath(folder), 300)
    found: list[Submission] = []
    for entry in others:
        name = safe_io.clean_text(entry.name, 80)
        note = f"graded as one of the entries of {shown}"
        if entry.suffix == ".ipynb" and not entry.is_dir():
            notebooks.mkdir(parents=True, exist_ok=True)
            sub = from_notebook(entry, notebooks)
            sub.notes.insert(0, note)
            found.append(sub)
        elif entry.is_symlink() or not _regular(entry) or entry.name.lower().endswith(ARCHIVES):
            found.append(Submission(entry.name, None, not_graded(entry, name)))
        else:
            print(f"grader: {shown}/{name}: not a submission (a file, not a folder or a "
                  "notebook): left out", file=sys.stderr)
    return found


def from_notebook(path: Path, parent: Path) -> Submission:
    """A notebook as the folder of modules its tagged cells hold (in a new folder under
    parent); one that cannot be read becomes an empty folder, graded zero with 'missing
    module' messages, and a note saying why."""
    from grader import nbextract

    folder = Path(tempfile.mkdtemp(prefix=f"{path.stem[:40]}-", dir=parent)) / path.stem
    notes = []
    try:
        nbextract.extract([path], folder)
    except nbextract.NoGradedCells:
        pass  # recorded beside the folder as its problem, which resolve() reads
    except Exception as err:  # noqa: BLE001 - any broken notebook; the class goes on
        folder.mkdir(parents=True, exist_ok=True)
        notes.append(f"no modules extracted from the notebook "
                     f"({type(err).__name__}: {safe_io.clean_text(err, 500)})")
    return Submission(path.stem, folder, notes=notes, source=path.resolve())


def resolve(paths: list[Path], notebooks: Path) -> list[Submission]:
    """The submissions given as paths (see the module docstring), with unique names;
    notebooks are extracted into folders under `notebooks`."""
    found: list[Submission] = []
    for path in paths:
        path = Path(path)
        shown = safe_io.clean_text(os.fspath(path), 300)
        if not os.path.lexists(path):
            found.append(Submission(path.name or shown, None, f"{shown}: no such file or "
                                    "folder: nothing was graded"))
        elif os.path.islink(path):
            found.append(Submission(path.name, None, not_graded(path, shown)))
        elif path.suffix == ".ipynb" and not path.is_dir():
            notebooks.mkdir(parents=True, exist_ok=True)
            found.append(from_notebook(path, notebooks))
        elif not path.is_dir():
            found.append(Submission(path.name, None, not_graded(path, shown)))
        else:
            nested = [] if holds_modules(path) else [
                s for s in _subfolders(path) if holds_modules(s)]
            if len(nested) >= 2:  # a class's folder: a submission per sub-folder
                subs = _subfolders(path)
                print(f"grader: {shown} holds no student module but {len(nested)} sub-folders "
                      f"that do: grading its {len(subs)} sub-folders as submissions",
                      file=sys.stderr)
                note = f"{NESTED_NOTE} {len(subs)} sub-folders of {shown}"
                found += [Submission(s.name, s.resolve(), notes=[note], cell_map=False)
                          for s in subs]
                found += _class_entries(path, subs, notebooks)
                continue
            notes = [f"no student module at the top level, but the sub-folder "
                     f"{safe_io.clean_text(nested[0].name, 80)}/ holds some: only modules at "
                     "the top level of a submission are graded"] if nested else []
            found.append(Submission(path.resolve().name, path.resolve(), notes=notes))
    # Two folders with one name: keep both reports. A folder named on the command line
    # keeps its name before a sub-folder of another: a student's folder shaped like a
    # class's folder, holding a sub-folder named after a classmate, must not take the
    # classmate's row.
    seen: set[str] = set()
    for sub in sorted(found, key=is_nested):
        while sub.name in seen:
            sub.name += "_"
        seen.add(sub.name)
    for sub in found:
        if sub.folder is not None:
            # What the grader's own extraction of a notebook recorded beside the folder
            extracted, problem = cellmap.read_notes(sub.folder) if sub.cell_map else ([], None)
            sub.notes += extracted
            if problem:
                sub.problem = problem
                continue
            try:
                note = manifest_of(sub.folder).note()
            except OSError as err:
                sub.problem = f"{safe_io.clean_text(sub.folder, 300)}: unreadable ({err.strerror})"
                continue
            if note:
                sub.notes.append(note)
    return found
