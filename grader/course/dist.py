"""`make dist-student`: what students receive, as a folder and a .tar.gz under build/dist/.

    python -m grader.course.dist [--out build/dist]

The distribution holds:
  starter/     the stubs, generated here from solution/ (as `make starter` does)
  nnkit/       the kit package, with its MNIST sample and the visible checks (nnkit.checks)
  grader/      the grader's student side, so that `make check` grades as the instructors
               do (its checks are not secret; the Part 1 speed items, scored against the
               solution, are reported as not graded there: see grader/student.py)
               In nnkit/ and grader/, solution-marked regions (the kit's own copies of
               student functions) ship as stubs, as in starter/, except where STANDINS
               names a plain replacement: nnkit/collectives.py's Part 3 twins call
               nnkit/plain_collectives.py, so that the reference MPI runs work.
  handouts/    the assignment texts
  tests/       the visible tests (`make test`), README.md, Makefile, pyproject.toml

and leaves out solution/, the bug specs (examples/bugs/, tests/), the notebooks' hidden
checks (grader/course/hidden.py), the instructors' tools (course, notebooks, sharded
grading, stub generation, this builder) and anything measured (results/, build/, grades/).
After building, every shipped file is scanned for solution code and hidden checks; a hit
fails the build.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import sys
import tarfile
from functools import partial
from pathlib import Path

from grader.course.hidden import HIDDEN
from grader.course.stubgen import BEGIN, END, HINT, expected_files, stub_source
from nnkit.submission import KIT_ROOT

NAME = "nnkit-student"
STUDENT_FILES = Path("grader") / "student_files"  # in the kit: the student README, ...
# The grader's package for instructors only (grader/course/): its modules read the
# solution, hold hidden checks, or serve a course rather than a student.
INSTRUCTOR_ONLY = {"course"}
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
# Files whose solution regions become calls to a plain stand-in instead of a stub: the
# kit's reference MPI runs (train --mpi --impl reference, bench-mpi) need working Part 3
# functions, and nnkit/plain_collectives.py says why its versions give nothing away.
STANDINS = {"nnkit/collectives.py": "plain_collectives"}
LONG_LINE = 30  # solution lines at least this long are distinctive enough to search for


class LeakError(RuntimeError):
    """Solution code or a hidden check found in the distribution."""


def _copy_grader(kit: Path, dest: Path) -> None:
    """The grader's student side: its modules and every stage package (the worker, what
    runs in the jail, among them) but the instructors' one."""
    dest.mkdir(parents=True)
    for path in sorted((kit / "grader").iterdir()):
        if path.is_file() and path.suffix in (".py", ".toml"):
            shutil.copy(path, dest / path.name)
        elif (path / "__init__.py").is_file() and path.name not in INSTRUCTOR_ONLY:
            shutil.copytree(path, dest / path.name, ignore=SKIP)


def build(out: Path = KIT_ROOT / "build" / "dist", kit: Path = KIT_ROOT) -> tuple[Path, Path]:
    """Write out/nnkit-student/ and out/nnkit-student.tar.gz from the kit in `kit` (its
    working tree); returns both."""
    solution, student_files = kit / "solution", kit / STUDENT_FILES
    root = out / NAME
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "starter").mkdir()
    for name, text in expected_files(solution).items():
        (root / "starter" / name).write_text(text)
    shutil.copytree(kit / "nnkit", root / "nnkit", ignore=SKIP)
    shutil.copytree(kit / "handouts", root / "handouts", ignore=SKIP)
    _copy_grader(kit, root / "grader")
    stubbed = stub_kit_answers(root)
    for name in ("README.md", "Makefile"):
        shutil.copy(student_files / name, root / name)
    # The kit's own pyproject: the same pins, package data and tool settings.
    shutil.copy(kit / "pyproject.toml", root / "pyproject.toml")
    (root / "tests").mkdir()
    shutil.copy(student_files / "test_visible.py", root / "tests" / "test_visible.py")
    (root / "tests" / "__init__.py").write_text("")
    assert_no_leak(root, solution)
    if stubbed:
        print(f"stubbed the solution regions of {', '.join(stubbed)}", file=sys.stderr)
    archive = out / f"{NAME}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname=NAME)
    return root, archive


def stub_kit_answers(root: Path) -> list[str]:
    """The kit's own copies of student functions (say, nnkit/collectives.py's trusted
    twins of Part 3) carry solution markers too: ship them as stubs, as in starter/."""
    stubbed = []
    for path in sorted([*(root / "nnkit").rglob("*.py"), *(root / "grader").rglob("*.py")]):
        text = path.read_text()
        if BEGIN in text:
            where = path.relative_to(root).as_posix()
            standin = STANDINS.get(where)
            body = None if standin is None else partial(call_standin, standin)
            path.write_text(stub_source(text, str(path), body))
            stubbed.append(where)
    return stubbed


def call_standin(module: str, function: str, indent: str) -> str:
    """A region's replacement: the same function of nnkit.<module>, given this one's
    arguments (the region is a whole function body, so locals() holds just them)."""
    return (f"{indent}arguments = dict(locals())  # the stand-in's are this function's\n"
            f"{indent}from nnkit import {module}\n\n"
            f"{indent}return {module}.{function}(**arguments)\n")


def solution_regions(solution: Path) -> list[list[str]]:
    """The code lines (stripped, hints and blanks left out) of every solution region."""
    regions = []
    for path in sorted(solution.glob("*.py")):
        region: list[str] | None = None
        for line in path.read_text().splitlines():
            if line.strip() == BEGIN:
                region = []
            elif line.strip() == END and region is not None:
                regions.append(region)
                region = None
            elif region is not None and line.strip() and not HINT.match(line):
                region.append(line.strip())
    return regions


def _hidden_snippets() -> list[str]:
    """Texts only a hidden check holds: each function's hidden cases as the notebooks
    write them, and the marker that opens a hidden-test region."""
    return ["BEGIN HIDDEN TESTS", *(repr(cases) for cases in HIDDEN.values())]


def find_leaks(root: Path, solution: Path) -> list[str]:
    """Every file in `root` holding a solution region: the whole of it, or two of its long
    lines (all of them, if it has fewer); and every hidden check. One long line alone is
    not counted, so that shared boilerplate (`rank, size = ...`) may ship."""
    regions = [(region, {line for line in region if len(line) >= LONG_LINE})
               for region in solution_regions(solution)]
    snippets = _hidden_snippets()
    leaks = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix == ".gz":
            continue  # the MNIST sample
        text = path.read_text(errors="replace")
        lines = {line.strip() for line in text.splitlines()}
        where = path.relative_to(root)
        stripped = "\n".join(line.strip() for line in text.splitlines())
        for region, long_lines in regions:
            found = sorted(long_lines & lines)
            if region and "\n".join(region) in stripped:
                leaks.append(f"{where}: a whole solution region ({region[0]!r} ...)")
            elif found and len(found) >= min(2, len(long_lines)):
                leaks.append(f"{where}: solution lines {found}")
        leaks += [f"{where}: hidden check {s[:60]!r}" for s in snippets if s in text]
        if path.suffix == ".py" and "grader" in path.parts:
            leaks += [f"{where}: imports instructor-only grader.{m}"
                      for m in _grader_imports(text) if m in INSTRUCTOR_ONLY]
    return leaks


def _grader_imports(text: str) -> set[str]:
    """grader modules a module imports (a shipped module must not need a withheld one)."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("grader."):
                found.add(node.module.split(".")[1])
            elif node.module == "grader":
                found.update(alias.name for alias in node.names)
    return found


def assert_no_leak(root: Path, solution: Path) -> None:
    leaks = find_leaks(root, solution)
    if leaks:
        raise LeakError("the student distribution would leak:\n  " + "\n  ".join(leaks[:20]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.course.dist",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=KIT_ROOT / "build" / "dist")
    parser.add_argument("--kit", type=Path, default=KIT_ROOT,
                        help="the kit to build from (default: this working tree)")
    args = parser.parse_args(argv)
    try:
        root, archive = build(args.out.resolve(), args.kit.resolve())
    except LeakError as err:
        print(f"grader.course.dist: {err}", file=sys.stderr)
        return 1
    print(f"wrote {root}/ and {archive}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
