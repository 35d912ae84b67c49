"""An nbgrader course made from the kit: release the notebooks, autograde a class, one
gradebook.

    python -m grader.nbcourse release   [--course DIR] [--assignments a,b] [--modules m,...]
    python -m grader.nbcourse sample-class [--course DIR]
    python -m grader.nbcourse autograde [--course DIR] [--jobs N]

`release` writes DIR/source/<part>/<part>.ipynb for each part (grader/notebook.py) and the
course's nbgrader_config.py, then runs `nbgrader generate_assignment`: DIR/release/ holds
what students get (stubs, visible checks; no solution, no hidden checks).

`autograde` takes the submissions nbgrader expects in DIR/submitted/<student>/<part>/ (put
there by `nbgrader collect`, `nbgrader zip_collect` or by hand), runs `nbgrader autograde`
(the notebooks' test cells, hidden ones restored) and `nbgrader export`, extracts the
modules of every student's submitted notebooks into DIR/extracted/<student>/, grades those
folders with `python -m grader` into DIR/kit_grades/, and writes both into
DIR/gradebook.csv, a row per student.

Only the notebooks' tagged cells reach the kit's grader. The assignments carry no .py
files, and Autograde.exclude_overwriting names every module file anyway: nbgrader's
copying of source files over a submission can never put solution code where it is graded.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from grader import examples
from grader.nbextract import NotebookError, extract
from grader.notebook import ASSIGNMENTS, Assignment, build_notebook, write_notebook
from nnkit.gemm import KERNELS
from nnkit.submission import KIT_ROOT

DEFAULT_COURSE = KIT_ROOT / "build" / "course"
STATE = "nnkit_course.json"  # what `release` built, for `autograde` to grade alike
PART_OF = {"part1-gemm": "gemm", "part2-network": "net"}  # assignment -> grader --parts
SAMPLE_BUG = "naive_beta_ignored"  # the buggy student of the sample class

CONFIG = """\
# Written by `python -m grader.nbcourse release`; rewritten on every release.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "nnkit"
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
# Kernels run in the CUDA simulator where there is no GPU: allow slow cells.
c.Execute.timeout = {timeout}
# Never copy a source file over a submitted module (there are none in source/, and this
# keeps it so should one be added).
c.Autograde.exclude_overwriting = {exclude!r}
"""


class CourseError(RuntimeError):
    """A course folder that cannot be released or graded as asked."""


def _nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run an nbgrader command in the course folder; kernels import this kit first.
    check=False: a failure is returned, not raised."""
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
    """Build source/ and run `nbgrader generate_assignment`; returns the released
    notebooks. `modules` keeps only those modules of each part (for quick trials)."""
    chosen = _chosen(assignments)
    course.mkdir(parents=True, exist_ok=True)
    exclude = {a.name: [f"{m}.py" for m in a.modules] for a in chosen}
    (course / "nbgrader_config.py").write_text(CONFIG.format(timeout=timeout, exclude=exclude))
    released, state = [], {"assignments": {}}
    for assignment in chosen:
        keep = tuple(m for m in assignment.modules if modules is None or m in modules)
        if not keep:
            continue
        source = course / "source" / assignment.name
        if source.exists():
            shutil.rmtree(source)  # no stale file, above all no .py, survives a release
        write_notebook(build_notebook(assignment, modules=keep),
                       source / f"{assignment.name}.ipynb")
        _nbgrader(course, "generate_assignment", assignment.name, "--force")
        released.append(course / "release" / assignment.name / f"{assignment.name}.ipynb")
        state["assignments"][assignment.name] = list(keep)
    (course / STATE).write_text(json.dumps(state, indent=1))
    return released


def _state(course: Path) -> dict[str, list[str]]:
    try:
        return json.loads((course / STATE).read_text())["assignments"]
    except (OSError, ValueError, KeyError) as err:
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
    for assignment in _state(course):
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


def _nbgrader_scores(csv_path: Path) -> dict[str, dict[str, tuple[float, float]]]:
    """student -> assignment -> (score, max_score), from `nbgrader export`."""
    scores: dict[str, dict[str, tuple[float, float]]] = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            scores.setdefault(row["student_id"], {})[row["assignment"]] = (
                float(row["score"] or 0), float(row["max_score"] or 0))
    return scores


def _grader_args(state: dict[str, list[str]]) -> list[str]:
    """--parts (and --kernels) matching what was released."""
    parts = [PART_OF[a] for a in state]
    args = ["--parts", ",".join(parts)]
    if "gemm" in parts:
        modules = state["part1-gemm"]
        args += ["--kernels", ",".join(k for k, (m, _) in KERNELS.items() if m in modules)]
    return args


def autograde(course: Path = DEFAULT_COURSE, jobs: int = 1) -> Path:
    """nbgrader's autograde and the kit's grader over every submission; returns the
    gradebook's path."""
    state = _state(course)
    students = _students(course)
    if not students:
        raise CourseError(f"{course}/submitted/ holds no student folder")
    start = time.perf_counter()
    for assignment in state:
        # nbgrader goes on past a submission it cannot grade, then exits non-zero: say so
        # and grade the rest (that student's notebook scores nothing).
        run = _nbgrader(course, "autograde", assignment, "--force", check=False)
        if run.returncode != 0:
            failed = [line for line in run.stderr.splitlines() if "for student" in line]
            print(f"nbgrader autograde {assignment}: " + ("; ".join(failed) or
                  run.stderr[-1000:]), file=sys.stderr)
    _nbgrader(course, "export", "--to", "nbgrader_grades.csv")
    print(f"nbgrader autograde and export: {time.perf_counter() - start:.1f} s for "
          f"{len(students)} student(s)", file=sys.stderr)
    extracted = course / "extracted"
    if extracted.exists():
        shutil.rmtree(extracted)
    problems = {}
    for student in students:
        folder = extracted / student
        folder.mkdir(parents=True)
        notebooks = [course / "submitted" / student / a / f"{a}.ipynb" for a in state]
        try:
            extract([nb for nb in notebooks if nb.is_file()], folder)
        except NotebookError as err:  # graded as an empty folder: every item says why
            problems[student] = str(err)
    out = course / "kit_grades"
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "grader", *map(str, sorted(extracted.iterdir())),
                             "--out", str(out), "--jobs", str(jobs), *_grader_args(state)],
                            cwd=KIT_ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise CourseError(f"the kit's grader failed:\n{result.stderr[-4000:]}")
    print(result.stdout)
    print(f"the kit's grader: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    for student, problem in problems.items():
        print(f"{student}: {problem}", file=sys.stderr)
    return write_gradebook(course, list(state), students)


def write_gradebook(course: Path, assignments: list[str], students: list[str]) -> Path:
    """DIR/gradebook.csv: nbgrader's score per assignment, the kit's items, the totals."""
    nb = _nbgrader_scores(course / "nbgrader_grades.csv")
    with open(course / "kit_grades" / "grades.csv", newline="") as f:
        kit = {row["submission"]: row for row in csv.DictReader(f)}
    items = [k for k in next(iter(kit.values()), {}) if k not in ("submission", "total",
                                                                     "max_total")]
    header = ["student"]
    for a in assignments:
        header += [f"nbgrader:{a}", f"nbgrader:{a}:max"]
    header += ["nbgrader_total", "nbgrader_max", *(f"kit:{i}" for i in items), "kit_total",
               "kit_max", "total", "max_total"]
    path = course / "gradebook.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for student in students:
            scores = [nb.get(student, {}).get(a, (0.0, 0.0)) for a in assignments]
            nb_total, nb_max = sum(s for s, _ in scores), sum(m for _, m in scores)
            row = kit.get(student, {})
            kit_total, kit_max = float(row.get("total") or 0), float(row.get("max_total") or 0)
            writer.writerow([student, *[f"{x:g}" for pair in scores for x in pair],
                             f"{nb_total:g}", f"{nb_max:g}", *(row.get(i, "") for i in items),
                             f"{kit_total:g}", f"{kit_max:g}", f"{nb_total + kit_total:g}",
                             f"{nb_max + kit_max:g}"])
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.nbcourse",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["release", "sample-class", "autograde"])
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE)
    parser.add_argument("--assignments", default=None,
                        help="release: comma-separated subset of "
                             + ", ".join(a.name for a in ASSIGNMENTS))
    parser.add_argument("--modules", default=None,
                        help="release: keep only these modules (a quick trial course)")
    parser.add_argument("--timeout", type=int, default=120,
                        help="release: seconds a notebook cell may run at autograde")
    parser.add_argument("--jobs", type=int, default=1, help="autograde: the grader's --jobs")
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
            print(f"gradebook: {autograde(course, args.jobs)}", file=sys.stderr)
    except CourseError as err:
        print(f"grader.nbcourse: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
