"""Where each line of a module extracted from a notebook came from: notebook, cell, line.

A student who handed in a notebook never saw `gemm_1_naive.py`; a message saying
"gemm_1_naive.py, line 12" must say "cell 7 of part1-gemm.ipynb, line 3" instead.
grader/nbextract.py writes the map as it joins the cells, and grader/reports/locate.py
reads it when it rewrites a submission's messages.

The map is a JSON file *beside* the extracted folder, `<folder>.cells.json`, never inside
it: the sandboxed jobs work on copies of the folder's .py files and cannot write there,
and a student who hands in a folder (rather than a notebook) cannot put a map beside it.
Each module's entry carries the SHA-256 of the module text it describes; a map that does
not describe the module being graded is ignored.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from grader import safe_io

SUFFIX = ".cells.json"
MAP_BYTES = 1 << 20
_DEF = re.compile(r"^(?:@[^\n]*\n)*\s*(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)


@dataclass(frozen=True)
class Span:
    """Lines first .. first + lines - 1 of a module are lines skipped + 1 .. of one cell."""

    first: int  # the module's line (1-based) where the cell's text starts
    lines: int  # how many lines of the module the cell fills
    skipped: int  # blank lines cut from the top of the cell when it was joined
    notebook: str  # the notebook's file name (no folder)
    cell: int  # the cell's position in its notebook, 1-based, counting every cell
    cell_id: str  # the cell's id (nbformat 4.5), or nbgrader's grade_id, or ''
    defines: str  # the first function or class the cell defines, or ''


def path_for(folder: Path) -> Path:
    """Where the map of an extracted folder is kept: beside it."""
    folder = Path(folder)
    return folder.parent / f"{folder.name}{SUFFIX}"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def spans_of(chunks: list[tuple[str, str, int, str]]) -> list[Span]:
    """The spans of one module's cells, (source, notebook, cell number, cell id) in the
    order they are joined (grader/nbextract.py, join_cells: each cell cut of its leading
    and trailing newlines, blank cells dropped, two blank lines between cells)."""
    spans, line = [], 1
    for source, notebook, cell, cell_id in chunks:
        if not source.strip():
            continue
        text = source.strip("\n")
        skipped = len(source) - len(source.lstrip("\n"))
        n = text.count("\n") + 1
        found = _DEF.search(text)
        # The notebook's name and the cell's id are the student's: cleaned and capped.
        spans.append(Span(line, n, skipped, safe_io.clean_text(notebook, 80), cell,
                          safe_io.clean_text(cell_id, 60), found.group(1)[:60] if found else ""))
        line += n + 2
    return spans


def write(folder: Path, modules: dict[str, tuple[str, list[Span]]]) -> Path:
    """Write the map of `folder`: module -> (its text, its spans)."""
    data = {m: {"sha256": digest(text), "spans": [asdict(s) for s in spans]}
            for m, (text, spans) in sorted(modules.items())}
    path = path_for(folder)
    path.write_text(json.dumps(data, indent=1))
    return path


def read(folder: Path, modules: set[str]) -> dict[str, list[Span]]:
    """The spans of each of `modules` whose text in `folder` is the one the map describes;
    {} when there is no map, or it is not one."""
    try:
        data = safe_io.read_json(path_for(folder), MAP_BYTES)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    found = {}
    for module in modules & set(data):
        entry = data[module]
        try:
            text = safe_io.read_bytes(Path(folder) / f"{module}.py", 8 << 20).decode()
            if not isinstance(entry, dict) or entry.get("sha256") != digest(text):
                continue
            found[module] = [Span(**s) for s in entry["spans"]]
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return found


def locate(spans: list[Span], line: int) -> tuple[Span, int] | None:
    """(the span, the line within its cell) of a module's line; None between cells."""
    for span in spans:
        if span.first <= line < span.first + span.lines:
            return span, line - span.first + 1 + span.skipped
    return None


def describe(span: Span, line: int) -> str:
    """'cell 7 of part1-gemm.ipynb [gemm_naive, id gemm_1_naive-2], line 3'."""
    about = ", ".join(x for x in (span.defines, f"id {span.cell_id}" if span.cell_id else "")
                      if x)
    return (f"cell {span.cell} of {span.notebook}" + (f" [{about}]" if about else "")
            + f", line {line}")
