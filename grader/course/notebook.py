"""Notebooks <-> modules: one notebook per part, whose code cells are the student modules.

A module of solution/ (say gemm_1_naive.py) is cut into code cells at its top-level
blank-line pairs (imports and constants, then one cell per function). Every such cell
carries the cell metadata `"nnkit": {"module": "gemm_1_naive"}`. Extraction is the
inverse: the tagged cells of a notebook, in notebook order, joined by two blank lines,
become <module>.py in a submission folder, which `python -m grader` grades like any
other. Nothing else of the notebook reaches the grader: untagged cells are scratch space,
files submitted beside the notebook are ignored, and only module names of the kit are
accepted from the (student-editable) metadata.

Cells holding a `### BEGIN SOLUTION` region are nbgrader solution cells (the region
becomes a stub on release); the `# HINT:` lines of a region are moved above its begin
marker so that they survive nbgrader's stub, as they survive `make starter`. After each
module come its test cells, one per function: a visible check and a hidden one
(grader/course/hidden.py) inside nbgrader's hidden-test markers.

    python -m grader.course.notebook build [--out DIR]        # the source notebooks
    python -m grader.course.notebook extract NOTEBOOK... --out FOLDER
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.cases.net import FUNCTIONS
from grader.course.hidden import HIDDEN
from grader.course.stubgen import BEGIN, END, HINT
from grader.nbextract import NotebookError, extract
from nnkit.gemm import BONUS_KERNELS, KERNELS
from nnkit.submission import KIT_ROOT, NAMED

TEST_POINTS = 1  # nbgrader points of each function's test cell


@dataclass(frozen=True)
class Assignment:
    """One nbgrader assignment: a part of the course, as one notebook."""

    name: str  # assignment id and notebook name
    title: str
    handout: str  # file under handouts/
    modules: tuple[str, ...]


ASSIGNMENTS: tuple[Assignment, ...] = (
    # The bonus kernels stay out of the notebooks (and so out of nbgrader's points): they
    # are files of starter/, graded by the kit when the instructor turns the bonus on.
    Assignment("part1-gemm", "Part 1: GEMM kernels", "part1-gemm.md",
               tuple(module for k, (module, _) in KERNELS.items() if k not in BONUS_KERNELS)),
    Assignment("part2-network", "Part 2: the network", "part2-network.md",
               ("net_1_kernels", "net_2_backprop")),
)


def checked_functions(module: str) -> list[str]:
    """The functions of a module that get a test cell, in the order the grader lists them."""
    return ([f for m, f in KERNELS.values() if m == module]
            + [f for f, (m, _) in FUNCTIONS.items() if m == module])


# -- modules -> cells -------------------------------------------------------------------

def split_module(source: str) -> list[str]:
    """Cut a module at each run of two or more blank lines between top-level statements."""
    lines = source.splitlines()
    covered = set()
    for node in ast.parse(source).body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        covered.update(range(first, node.end_lineno + 1))
    cells, current, blanks = [], [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip() and number not in covered:
            blanks.append(line)
            continue
        if len(blanks) >= 2 and current:
            cells.append("\n".join(current))
            current = []
        elif current:
            current += blanks
        blanks = []
        current.append(line)
    if current:
        cells.append("\n".join(current))
    return cells


def hoist_hints(source: str) -> str:
    """Move each solution region's `# HINT:` lines just above its begin marker."""
    out: list[str] = []
    region: list[str] | None = None
    for line in source.splitlines(keepends=True):
        if line.strip() == BEGIN:
            region, marker = [], line
        elif region is not None and line.strip() == END:
            out += [h for h in region if HINT.match(h)] + [marker]
            out += [c for c in region if not HINT.match(c)] + [line]
            region = None
        elif region is not None:
            region.append(line)
        else:
            out.append(line)
    return "".join(out)


# -- notebooks --------------------------------------------------------------------------

def _cell(kind: str, source: str, cell_id: str, nbgrader: dict | None = None,
          module: str | None = None) -> dict:
    cell: dict = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    if nbgrader is not None:
        cell["metadata"]["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False,
                                        "locked": False, **nbgrader}
    if module is not None:
        cell["metadata"]["nnkit"] = {"module": module}
    return cell


INTRO = """\
# {title}

How this notebook works:

- Your code goes in the code cells under each module's heading. Those cells, in order,
  *are* that module: the grader cuts them out of the notebook into `<module>.py` and grades
  them as it grades a folder of modules. Cells you add yourself are scratch space and are
  not graded: write helpers inside an existing cell of the module.
- Run the setup cell first. The test cell after each module runs a few quick checks of
  your functions; the grade also counts hidden checks and the full grader (`make check` in
  the student kit).
- The assignment text follows.

---
"""

SETUP = """\
# Run this cell first: it chooses the GPU or the CUDA simulator and lets a module's cells
# import from the modules above them, as they will once graded.
from nnkit.checks import check
from nnkit.notebook import setup

setup(globals(), {modules!r})"""


def for_notebook(handout: str) -> str:
    """A handout's text as the notebook shows it: its modules are the notebook's cells,
    not files to edit in starter/."""
    return handout.replace("| file you edit (in `starter/`) |",
                           "| module (its code cells are in this notebook) |")


def build_notebook(assignment: Assignment, solution: Path = NAMED["solution"],
                   handouts: Path = KIT_ROOT / "handouts",
                   modules: tuple[str, ...] | None = None) -> dict:
    """The nbgrader source notebook of an assignment (solutions and hidden tests in it).
    `modules` restricts it to some of the assignment's modules (for quick tests)."""
    chosen = assignment.modules if modules is None else modules
    intro = INTRO.format(title=assignment.title)
    cells = [_cell("markdown", intro, "intro"),
             _cell("markdown", for_notebook((handouts / assignment.handout).read_text()),
                   "handout"),
             _cell("code", SETUP.format(modules=list(chosen)), "setup",
                   {"locked": True, "grade_id": "setup"})]
    for module in chosen:
        cells.append(_cell("markdown", f"## `{module}.py`", f"{module}-title"))
        text = hoist_hints((solution / f"{module}.py").read_text())
        for n, chunk in enumerate(split_module(text)):
            grade_id = f"{module}-{n}"
            meta = {"solution": True, "grade_id": grade_id} if BEGIN in chunk else None
            cells.append(_cell("code", chunk, grade_id, meta, module))
        for function in checked_functions(module):
            test = (f'check("{function}", {function})\n'
                    "### BEGIN HIDDEN TESTS\n"
                    f'check("{function}", {function}, {HIDDEN[function]!r})\n'
                    "### END HIDDEN TESTS")
            cells.append(_cell("code", test, f"test-{function}",
                               {"grade": True, "locked": True, "points": TEST_POINTS,
                                "grade_id": f"test-{function}"}))
    return {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"},
                         "language_info": {"name": "python"}}}


def write_notebook(notebook: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.course.notebook",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="write the source notebook of each part")
    build.add_argument("--out", type=Path, default=KIT_ROOT / "build" / "notebooks")
    ext = sub.add_parser("extract", help="write the modules of notebooks into a folder")
    ext.add_argument("notebooks", nargs="+", type=Path)
    ext.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "build":
        for assignment in ASSIGNMENTS:
            path = args.out / f"{assignment.name}.ipynb"
            write_notebook(build_notebook(assignment), path)
            print(f"wrote {path}", file=sys.stderr)
        return 0
    try:
        names = extract(args.notebooks, args.out)
    except NotebookError as err:
        print(f"grader.course.notebook: {err}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(n + '.py' for n in names) or 'nothing'} into {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
