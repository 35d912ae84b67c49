"""Notebook submissions -> module folders: the tagged code cells of a notebook, in notebook
order, joined by two blank lines, become <module>.py (see grader/course/notebook.py for how the
notebooks are built). Nothing else of a notebook reaches the grader: untagged cells are
scratch space, and only module names of the kit are accepted from the (student-editable)
metadata, never a path. Kept apart from grader/course/notebook.py, which holds hidden checks,
because students' `make check` extracts notebooks too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from grader import cellmap, safe_io
from nnkit.checks import MODULES as FUNCTION_MODULES

NOTEBOOK_BYTES = 16 << 20  # a notebook larger than this is not read
MODULES = set(FUNCTION_MODULES.values())  # the student modules, named by nnkit.checks


class NotebookError(ValueError):
    """A file that is not a readable notebook."""


def join_cells(cells: list[str]) -> str:
    """The module text of a module's cells (the inverse of split_module)."""
    kept = [c.strip("\n") for c in cells if c.strip()]
    return "\n\n\n".join(kept) + "\n" if kept else ""


# -- cells -> modules -------------------------------------------------------------------

def _source(cell: dict, number: int) -> str:
    """A code cell's text (a string, or a list of strings, as nbformat has it), as UTF-8
    can hold it: a lone surrogate (a \\udcxx escape in the JSON) becomes '?'."""
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise NotebookError(f"cell {number}: its source is {type(source).__name__}, not text")
    return source.encode("utf-8", "replace").decode("utf-8")


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _id_module(text: object) -> str | None:
    """The module of an id of the kit's form "<module>-<n>" (nbgrader's grade ids and the
    cells' own ids are made so by grader/course/notebook.py)."""
    head, dash, n = str(text or "").rpartition("-")
    return head if dash and n.isdigit() else None


def _module_of(cell: dict) -> tuple[str | None, str]:
    """(the module a code cell belongs to, how it was known: "tag", "grade id", "cell
    id"); (None, "") for a scratch cell. Only module names of the kit, never a path."""
    meta = _dict(cell.get("metadata"))
    for module, how in ((_dict(meta.get("nnkit")).get("module"), "tag"),
                        # the tag lost: nbgrader's grade id, or the cell's own id, kept
                        (_id_module(_dict(meta.get("nbgrader")).get("grade_id")), "grade id"),
                        (_id_module(cell.get("id")), "cell id")):
        if isinstance(module, str) and module in MODULES:
            return module, how
    return None, ""


def _cell_id(cell: dict) -> str:
    cell_id = cell.get("id") or _dict(_dict(cell.get("metadata")).get("nbgrader")).get(
        "grade_id") or ""
    return str(cell_id)


NO_GRADED_CELLS = (
    "{name}: the notebook has no graded cells, so nothing in it was graded. The kit grades "
    "the code cells of the assignment notebook as released, which carry a tag in their "
    'metadata ("nnkit": {{"module": ...}}): write your code in that notebook\'s cells (or '
    "copy it there) and keep their metadata, or tag each cell of your code with "
    '"nnkit": {{"module": "<module name>"}} (JupyterLab: the property inspector, "Cell '
    'Metadata"); code in untagged cells is scratch space and is never graded')
UNTAGGED = (
    "{name}: {n} code cell(s) had lost the kit's tag (cell metadata \"nnkit\", stripped by "
    "an editor or a conversion?) and were recognised by their id instead; keep the "
    "released notebook's metadata")
LOST_FIRST_CELL = (
    "{name}: the kit's tags were stripped from this notebook, and the first cell of "
    "{module}.py (its imports and constants) could not be recognised without them: it is "
    "not graded, so {module}.py lacks what that cell defined. Hand in the notebook with "
    "its metadata as released")


class NoGradedCells(NotebookError):
    """A notebook (or every notebook of a submission) with no tagged code cell."""


Chunk = tuple[str, str, int, str]  # source, notebook name, cell number, cell id


@dataclass
class NotebookCells:
    """The tagged cells of one notebook, by module, and how some were recognised."""

    modules: dict[str, list[Chunk]] = field(default_factory=dict)
    untagged: int = 0  # cells recognised by an id, their tag lost
    first_cells: set[str] = field(default_factory=set)  # modules whose cell "<m>-0" is in

    def notes(self, name: str) -> list[str]:
        if not self.untagged:
            return []
        found = [UNTAGGED.format(name=name, n=self.untagged)]
        found += [LOST_FIRST_CELL.format(name=name, module=m)
                  for m in sorted(set(self.modules) - self.first_cells)]
        return found


def notebook_cells(path: Path) -> NotebookCells:
    """The tagged code cells of one notebook, in order, by module."""
    try:
        # A regular file within the cap: never a FIFO or a device, which would block
        notebook = json.loads(safe_io.read_bytes(path, NOTEBOOK_BYTES).decode())
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("its cells are not a list")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        # (RecursionError: JSON nested deeper than the decoder goes)
        raise NotebookError(f"{path}: not a readable notebook ({type(err).__name__}: "
                            f"{safe_io.clean_text(err, 300)})") from err
    found = NotebookCells()
    for number, cell in enumerate(cells, 1):
        if not (isinstance(cell, dict) and cell.get("cell_type") == "code"):
            continue
        module, how = _module_of(cell)
        if module is None:
            continue
        cell_id = _cell_id(cell)
        found.modules.setdefault(module, []).append(
            (_source(cell, number), Path(path).name, number, cell_id))
        found.untagged += how != "tag"
        if how == "tag" or _id_module(cell_id) == module and cell_id.endswith("-0"):
            found.first_cells.add(module)
    return found


def notebook_modules(path: Path) -> dict[str, str]:
    """Module name -> module text, from the tagged code cells of one notebook."""
    return {module: join_cells([c[0] for c in chunks])
            for module, chunks in notebook_cells(path).modules.items()}


@dataclass
class Extraction:
    """What extract_notebooks wrote, and what the student should be told."""

    names: list[str]
    notes: list[str]
    empty: list[Path]  # notebooks with no graded cell


def extract_notebooks(notebooks: list[Path], dest: Path) -> Extraction:
    """Write the modules of the notebooks into the folder dest, and beside it the record
    of their cells and notes (grader/cellmap.py). A module found in two notebooks is an
    error (the grader would see one of them only); so is a set of notebooks none of which
    has a graded cell (NoGradedCells, recorded as the folder's problem too). A notebook
    with none among others that have some is a note, and listed in `empty`."""
    dest.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    spans: dict[str, tuple[str, list[cellmap.Span]]] = {}
    notes, empty = [], []
    for path in notebooks:
        found = notebook_cells(path)
        name = safe_io.clean_text(Path(path).name, 120)
        if not found.modules:
            empty.append(path)
            notes.append(NO_GRADED_CELLS.format(name=name))
        notes += found.notes(name)
        for module, chunks in found.modules.items():
            if module in written:
                raise NotebookError(f"{module}.py is in both {written[module]} and {path}")
            text = join_cells([c[0] for c in chunks])
            (dest / f"{module}.py").write_text(text)
            written[module] = path
            spans[module] = (text, cellmap.spans_of(chunks))
    problem = None
    if notebooks and not written:
        problem = notes[0] if len(notebooks) == 1 else (
            "none of the notebooks has a graded cell: " + "; ".join(notes))
    cellmap.write(dest, spans, [] if problem else notes, problem)
    if problem:
        raise NoGradedCells(problem)
    return Extraction(sorted(written), notes, empty)


def extract(notebooks: list[Path], dest: Path) -> list[str]:
    """extract_notebooks, returning the names of the modules written."""
    return extract_notebooks(notebooks, dest).names
