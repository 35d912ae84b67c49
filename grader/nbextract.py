"""Notebook submissions -> module folders: the tagged code cells of a notebook, in notebook
order, joined by two blank lines, become <module>.py (see grader/course/notebook.py for how the
notebooks are built). Nothing else of a notebook reaches the grader: untagged cells are
scratch space, and only module names of the kit are accepted from the (student-editable)
metadata, never a path. Kept apart from grader/course/notebook.py, which holds hidden checks,
because students' `make check` extracts notebooks too.
"""

from __future__ import annotations

import json
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

def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _module_of(cell: dict) -> str | None:
    meta = cell.get("metadata") or {}
    module = (meta.get("nnkit") or {}).get("module")
    if module is None:  # metadata lost but nbgrader's cell id kept: "<module>-<n>"
        grade_id = str((meta.get("nbgrader") or {}).get("grade_id", ""))
        module = grade_id.rsplit("-", 1)[0] if "-" in grade_id else None
    return module if module in MODULES else None  # never a path the student chose


def _cell_id(cell: dict) -> str:
    meta = cell.get("metadata") or {}
    cell_id = cell.get("id") or (meta.get("nbgrader") or {}).get("grade_id") or ""
    return str(cell_id)


def notebook_cells(path: Path) -> dict[str, list[tuple[str, str, int, str]]]:
    """Module name -> its tagged code cells of one notebook, in order, as (source,
    notebook name, cell number counting every cell from 1, cell id)."""
    try:
        # A regular file within the cap: never a FIFO or a device, which would block
        notebook = json.loads(safe_io.read_bytes(path, NOTEBOOK_BYTES).decode())
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("its cells are not a list")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise NotebookError(f"{path}: not a readable notebook ({err})") from err
    parts: dict[str, list[tuple[str, str, int, str]]] = {}
    for number, cell in enumerate(cells, 1):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            module = _module_of(cell)
            if module:
                parts.setdefault(module, []).append(
                    (_source(cell), Path(path).name, number, _cell_id(cell)))
    return parts


def notebook_modules(path: Path) -> dict[str, str]:
    """Module name -> module text, from the tagged code cells of one notebook."""
    return {module: join_cells([c[0] for c in chunks])
            for module, chunks in notebook_cells(path).items()}


def extract(notebooks: list[Path], dest: Path) -> list[str]:
    """Write the modules of the notebooks into the folder dest, and beside it the map of
    their lines to the notebooks' cells (grader/cellmap.py); returns their names. A
    module found in two notebooks is an error (the grader would see one of them only)."""
    dest.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    spans: dict[str, tuple[str, list[cellmap.Span]]] = {}
    for path in notebooks:
        for module, chunks in notebook_cells(path).items():
            if module in written:
                raise NotebookError(f"{module}.py is in both {written[module]} and {path}")
            text = join_cells([c[0] for c in chunks])
            (dest / f"{module}.py").write_text(text)
            written[module] = path
            spans[module] = (text, cellmap.spans_of(chunks))
    cellmap.write(dest, spans)
    return sorted(written)
