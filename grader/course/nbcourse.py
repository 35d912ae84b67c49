"""An nbgrader course made from the kit: release the notebooks, autograde a class, one
gradebook.

    python -m grader.course.nbcourse release   [--course DIR] [--assignments a,b] [--modules m,...]
    python -m grader.course.nbcourse sample-class [--course DIR]
    python -m grader.course.nbcourse autograde [--course DIR] [--jobs N] [--allow-uncommitted]

`release` writes DIR/source/<part>/<part>.ipynb for each part (grader/course/notebook.py) and the
course's nbgrader_config.py, runs `nbgrader generate_assignment` (DIR/release/ holds what
students get: stubs, visible checks; no solution, no hidden checks) and writes the kit's
manifest, DIR/kit_manifest.json (grader/isolation/integrity.py).

`autograde` never executes a notebook, and never runs `nbgrader autograde`, which would
run every cell of every submission in a kernel of the grader's own user. First it checks
that the kit is the one released (the manifest, and git HEAD in a git checkout). Then, for
the submissions in DIR/submitted/<student>/<part>/ (put there by `nbgrader collect`,
`zip_collect` or by hand), it extracts the tagged cells of every student's notebooks into
DIR/extracted/<student>/ (grader/nbextract.py: scratch cells are dropped unread), and
grades those folders with the kit's sandboxed grader into DIR/kit_grades/. nbgrader's
own test cells are graded by the kit too: a sandboxed job per notebook
(grader/worker/nbtests.py) only records what the student's functions did on the cells'
cases; this process replays the recordings through the same checks and writes the
points into nbgrader's gradebook (DIR/gradebook.db), where formgrader and `nbgrader
export` find them, with the autograded notebooks in DIR/autograded/. Both sets of scores
go into DIR/gradebook.csv, a row per student.

Only the notebooks' tagged cells are ever run, and only in the sandbox; test cells come
from the gradebook (what was released), never from a submitted notebook.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from grader import cellmap, examples
from grader.course.gradebook import autograded_notebook, save_scores, write_gradebook
from grader.course.notebook import ASSIGNMENTS, Assignment, build_notebook, write_notebook
from grader.course.testcells import (
    COURSE_ID,
    CourseError,
    Student,
    check_cells,
    gate_by_kit,
    grade_check_cells,
    parse_test_cell,  # noqa: F401
)
from grader.isolation import integrity, sandbox
from grader.nbextract import NotebookError, extract_notebooks
from grader.reports import report
from grader.scoring import DEFAULT_CONFIG, ConfigError, load_config
from nnkit.gemm import BONUS_KERNELS, KERNELS
from nnkit.submission import KIT_ROOT

DEFAULT_COURSE = KIT_ROOT / "build" / "course"
STATE = "nnkit_course.json"  # what `release` built, for `autograde` to grade alike
PART_OF = {"part1-gemm": "gemm", "part2-network": "net"}  # assignment -> grader --parts
SAMPLE_BUG = "naive_beta_ignored"  # the buggy student of the sample class

CONFIG = """\
# Written by `python -m grader.course.nbcourse release`; rewritten on every release.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "{course_id}"
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
# Submissions are graded by `make autograde` (python -m grader.course.nbcourse autograde), which
# runs the students' code in the kit's sandbox only. `nbgrader autograde` would run every
# cell of every notebook, unconfined, as whoever starts it: it is given a kernel that does
# not exist, so that it fails before any cell runs.
c.Execute.kernel_name = "nnkit-use-make-autograde"
"""



def _nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run an nbgrader command in the course folder (release only: nothing here executes a
    notebook). check=False: a failure is returned, not raised."""
    def path(*first: str, var: str) -> str:
        return os.pathsep.join(p for p in (*first, os.environ.get(var, "")) if p)

    # nbgrader runs `alembic` from PATH: the one beside this interpreter, venv or not.
    env = {**os.environ, "PYTHONPATH": path(str(KIT_ROOT), var="PYTHONPATH"),
           "PATH": path(str(Path(sys.executable).parent), var="PATH")}
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                            capture_output=True, text=True)
    if check and result.returncode != 0:
        raise CourseError(f"nbgrader {' '.join(args)} failed:\n{result.stderr[-4000:]}")
    return result


def _chosen(names: list[str] | None) -> list[Assignment]:
    known = {a.name: a for a in ASSIGNMENTS}
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise CourseError(f"unknown assignment(s) {unknown}; known: {', '.join(known)}")
    return [known[n] for n in names] if names else list(ASSIGNMENTS)


def release(course: Path = DEFAULT_COURSE, assignments: list[str] | None = None,
            modules: list[str] | None = None, timeout: int = 120) -> list[Path]:
    """Build source/, run `nbgrader generate_assignment` and write the kit's manifest;
    returns the released notebooks. `modules` keeps only those modules of each part (for
    quick trials); `timeout`: seconds a test cell may run at autograde."""
    chosen = _chosen(assignments)
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(CONFIG.format(course_id=COURSE_ID))
    released, state = [], {"assignments": {}, "timeout": timeout}
    for assignment in chosen:
        keep = tuple(m for m in assignment.modules if modules is None or m in modules)
        if not keep:
            continue
        source = course / "source" / assignment.name
        if source.exists():
            shutil.rmtree(source)  # no stale file survives a release
        write_notebook(build_notebook(assignment, modules=keep),
                       source / f"{assignment.name}.ipynb")
        _nbgrader(course, "generate_assignment", assignment.name, "--force")
        released.append(course / "release" / assignment.name / f"{assignment.name}.ipynb")
        state["assignments"][assignment.name] = list(keep)
    (course / STATE).write_text(json.dumps(state, indent=1))
    integrity.write(course / integrity.COURSE_MANIFEST)
    changes = integrity.git_changes()
    if changes:  # released all the same (a kit in development), but autograde will refuse
        print("release: the kit differs from git HEAD, and `make autograde` will refuse to "
              "grade until it does not (or is given --allow-uncommitted):\n  "
              + "\n  ".join(changes), file=sys.stderr)
    return released


def _state(course: Path) -> dict:
    try:
        state = json.loads((course / STATE).read_text())
        state["assignments"]  # noqa: B018 - a release wrote it
        return state
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CourseError(f"{course}: no release found (run `make release` first)") from err


# -- the sample class -------------------------------------------------------------------

def _filled(released: dict, source: dict, edit: dict | None = None) -> dict:
    """The released notebook with the source's code in every module cell: what a student
    who wrote the solution (with `edit` applied, if given) would hand in."""
    by_id = {c["id"]: c for c in source["cells"]}
    notebook = json.loads(json.dumps(released))
    for cell in notebook["cells"]:
        if "nnkit" in cell["metadata"] and cell["id"] in by_id:
            cell["source"] = by_id[cell["id"]]["source"]
            if edit and cell["metadata"]["nnkit"]["module"] + ".py" == edit["file"]:
                cell["source"] = cell["source"].replace(edit["old"], edit["new"])
    return notebook


def sample_class(course: Path = DEFAULT_COURSE) -> dict[str, str]:
    """Submissions of three students: alice hands in the solution, bob the untouched
    release (plus a module file of his own, which must be ignored), carol the solution with
    the bug examples/bugs/naive_beta_ignored.toml. Returns student -> what they handed in."""
    bug = examples.load_spec(examples.BUG_DIR / f"{SAMPLE_BUG}.toml").edits[0]
    for assignment in _state(course)["assignments"]:
        released = json.loads((course / "release" / assignment / f"{assignment}.ipynb")
                              .read_text())
        source = json.loads((course / "source" / assignment / f"{assignment}.ipynb")
                            .read_text())
        for student, notebook in (("alice", _filled(released, source)), ("bob", released),
                                  ("carol", _filled(released, source, bug))):
            folder = course / "submitted" / student / assignment
            if folder.exists():
                shutil.rmtree(folder)
            write_notebook(notebook, folder / f"{assignment}.ipynb")
            if student == "bob" and assignment == "part1-gemm":
                (folder / "gemm_1_naive.py").write_text("# bob's own copy, never graded\n")
    return {"alice": "solution", "bob": "starter", "carol": SAMPLE_BUG}


# -- autograding ------------------------------------------------------------------------

def _students(course: Path) -> list[str]:
    submitted = course / "submitted"
    return sorted(p.name for p in submitted.iterdir() if p.is_dir()) if submitted.is_dir() else []


def _grader_args(assignments: dict[str, list[str]], bonus: bool = False) -> list[str]:
    """--parts (and --kernels) matching what was released; the bonus kernels only where
    the grading config turns the bonus on."""
    parts = [PART_OF[a] for a in assignments]
    args = ["--parts", ",".join(parts)]
    if "gemm" in parts:
        modules = assignments["part1-gemm"]
        args += ["--kernels", ",".join(k for k, (m, _) in KERNELS.items()
                                       if m in modules and (bonus or k not in BONUS_KERNELS))]
    return args


def _close_course(course: Path) -> None:
    """As root, without a mount namespace, jobs are kept out by their uid alone: take
    other users' access to the course (solutions in source/, hidden tests in the
    gradebook, every submission) away. Its owner and group keep theirs."""
    info = course.stat()
    if os.geteuid() == 0 and info.st_mode & 0o007:
        course.chmod(info.st_mode & ~0o007)


def extract_all(course: Path, assignments: list[str]) -> list[Student]:
    extracted = course / "extracted"
    if extracted.exists():
        shutil.rmtree(extracted)
    students = []
    for name in _students(course):
        student = Student(name, extracted / name)
        students.append(student)
        # An id ending in the records' suffix names where another student's record goes
        # (red team: alice.notebook.json stopped `make autograde` for the whole class).
        if name.endswith(cellmap.SUFFIX):
            student.problem = (f"could not be extracted (the id ends in {cellmap.SUFFIX}, "
                               "which the grader's records use: rename the student)")
            continue
        try:
            student.folder.mkdir(parents=True)
        except OSError as err:
            student.problem = f"could not be extracted ({err.strerror})"
            continue
        student.notebooks = {a: nb for a in assignments
                             if (nb := course / "submitted" / name / a / f"{a}.ipynb").is_file()}
        try:
            # A link could name any file the grader may read (another student's notebook,
            # source/ with its solutions): never followed.
            linked = [nb for nb in student.notebooks.values()
                      if any(p.is_symlink() for p in (nb, nb.parent, nb.parent.parent))]
            if linked:
                raise NotebookError(f"{linked[0]}: a symbolic link, not read")
            done = extract_notebooks(list(student.notebooks.values()), student.folder)
            student.notes, student.empty = done.notes, [p.name for p in done.empty]
        except NotebookError as err:  # every item of the kit's report says why
            student.problem = str(err)
            for module in student.folder.iterdir():
                module.unlink()
            cellmap.write(student.folder, {}, problem=student.problem)
    return students


def problems(students: list[Student]) -> tuple[list[str], list[str]]:
    """(a line per student whose notebooks could not be graded, wholly or in part; a line
    per note of extraction, such as cells that had lost the kit's tag)."""
    errors, notes = [], []
    for s in students:
        if s.problem:
            errors.append(f"{s.name}: nothing graded: {s.problem}")
        elif s.empty:
            errors.append(f"{s.name}: {', '.join(s.empty)}: not graded, the notebook has "
                          "no graded cells")
        notes += [f"{s.name}: note: {n}" for n in s.notes
                  if not any(n.startswith(f"{e}: the notebook has no graded") for e in s.empty)]
    return errors, notes


def autograde(course: Path = DEFAULT_COURSE, jobs: int = 1, *,
              allow_uncommitted: bool = False, config: Path = DEFAULT_CONFIG) -> Path:
    """Grade every submission, nbgrader's test cells and the kit's items alike; returns the
    gradebook's path. Refuses (integrity.IntegrityError) a kit that differs from the
    release's manifest or, unless allow_uncommitted, from git HEAD."""
    return autograde_class(course, jobs, allow_uncommitted=allow_uncommitted,
                           config=config)[0]


def autograde_class(course: Path = DEFAULT_COURSE, jobs: int = 1, *,
                    allow_uncommitted: bool = False, config: Path = DEFAULT_CONFIG
                    ) -> tuple[Path, list[str]]:
    """autograde, returning the gradebook's path and a line per student whose notebooks
    could not be graded (problems(); these and the notes are printed too)."""
    integrity.require(course / integrity.COURSE_MANIFEST, git=not allow_uncommitted)
    state = _state(course)
    assignments: dict[str, list[str]] = state["assignments"]
    timeout = float(state.get("timeout", 120))
    try:
        bonus = load_config(config).bonus  # and the sandbox's settings, for the test cells' jobs
    except ConfigError as err:
        raise CourseError(str(err)) from err
    _close_course(course)
    cells = {a: check_cells(course, a) for a in assignments}
    students = extract_all(course, list(assignments))
    if not students:
        raise CourseError(f"{course}/submitted/ holds no student folder")

    out = course / "kit_grades"
    start = time.perf_counter()
    # Run from the course folder: the sandbox hides the grader's working folder from jobs.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(KIT_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    argv = [sys.executable, "-P", "-m", "grader", *(str(s.folder) for s in students),
            "--out", str(out), "--jobs", str(jobs), "--config", str(Path(config).resolve()),
            *_grader_args(assignments, bonus)]
    result = subprocess.run(argv, cwd=course, env=env, capture_output=True, text=True)
    # Status 1 also says that some submission was graded zero for a problem (recorded
    # beside its folder at extraction): a failure only if it did not write every report.
    expected = any(s.problem for s in students) and result.returncode == 1 and all(
        (out / f"{report.safe_name(s.name)}.json").is_file() for s in students)
    if result.returncode != 0 and not expected:
        raise CourseError(f"the kit's grader failed:\n{result.stderr[-4000:]}")
    print(result.stdout)
    print(f"the kit's grader: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    start = time.perf_counter()
    settings = sandbox.current()
    # Jobs never see the course, wherever it is (a uid of their own keeps them out of it
    # too, as root; not as root, they run as the grader's user).
    sandbox.use(replace(settings, hide=(*settings.hide, str(course))))
    try:
        with tempfile.TemporaryDirectory(prefix="nbcourse-") as tmp:
            results = grade_check_cells(students, cells, timeout, jobs, Path(tmp))
    finally:
        sandbox.use(settings)
    # A test cell's check() sees a few cases; the kit's item for the same function runs
    # every defence (policy, traps, launch replay, guard) on more. A cell whose function
    # the kit found wrong earns nothing either (found by red-team rounds: a host product
    # behind an empty kernel passed the cells, and so did one that failed the kit's cases
    # on purpose to stay clear of its rules).
    results = gate_by_kit(results, students, cells, out)
    nb_scores = save_scores(course, students, list(assignments), cells, results)
    autograded = course / "autograded"
    for s in students:
        for assignment, submitted in s.notebooks.items():
            folder = autograded / s.name / assignment
            if folder.exists():
                shutil.rmtree(folder)
            if s.problem:
                continue  # nothing was read: its zero is in the gradebook
            try:
                notebook = autograded_notebook(submitted, cells[assignment],
                                               results[s.name, assignment])
            except (OSError, ValueError, AttributeError, TypeError):
                continue  # not a notebook: its zero is in the gradebook
            write_notebook(notebook, folder / submitted.name)
    print(f"test cells, in the sandbox: {time.perf_counter() - start:.1f} s for "
          f"{len(students)} student(s)", file=sys.stderr)

    errors, notes = problems(students)
    for line in notes + errors:
        print(line, file=sys.stderr)
    return write_gradebook(course, list(assignments), [s.name for s in students],
                           nb_scores), errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.course.nbcourse",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["release", "sample-class", "autograde"])
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE)
    parser.add_argument("--assignments", default=None,
                        help="release: comma-separated subset of "
                             + ", ".join(a.name for a in ASSIGNMENTS))
    parser.add_argument("--modules", default=None,
                        help="release: keep only these modules (a quick trial course)")
    parser.add_argument("--timeout", type=int, default=120,
                        help="release: seconds a test cell may run at autograde")
    parser.add_argument("--jobs", type=int, default=1, help="autograde: jobs at a time")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG,
                        help="autograde: the kit grader's points, limits and sandbox")
    parser.add_argument("--allow-uncommitted", action="store_true",
                        help="autograde: compare the kit with the release's manifest only, "
                             "not with git HEAD (a kit in development)")
    args = parser.parse_args(argv)

    def split(text: str | None) -> list[str] | None:
        return [x.strip() for x in text.split(",") if x.strip()] if text else None

    course = args.course.resolve()
    try:
        if args.command == "release":
            for path in release(course, split(args.assignments), split(args.modules),
                                args.timeout):
                print(f"released {path}", file=sys.stderr)
        elif args.command == "sample-class":
            for student, what in sample_class(course).items():
                print(f"{student}: {what}", file=sys.stderr)
        else:
            gradebook, errors = autograde_class(course, args.jobs,
                                                allow_uncommitted=args.allow_uncommitted,
                                                config=args.config)
            print(f"gradebook: {gradebook}", file=sys.stderr)
            if errors:  # graded zero where they could not be read: a status make shows
                print(f"grader.course.nbcourse: {len(errors)} student(s) with notebooks that "
                      "could not be graded, listed above (their scores are in the "
                      "gradebook, zero for what was not graded)", file=sys.stderr)
                return 1
    except (CourseError, integrity.IntegrityError) as err:
        print(f"grader.course.nbcourse: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
