"""What the grader's extraction of a notebook recorded: where each line of a module came
from (notebook, cell, line), and what the student should be told about the notebook.

A student who handed in a notebook never saw `gemm_1_naive.py`; a message saying
"gemm_1_naive.py, line 12" must say "cell 7 of part1-gemm.ipynb, line 3" instead.
grader/nbextract.py writes the map as it joins the cells, and grader/reports/locate.py
reads it when it rewrites a submission's messages.

The record also carries notes (cells that had lost the kit's tag, a notebook with no
graded cells among several) and, when nothing could be extracted, the problem: the
grader reads both when it is given the folder (grader/submissions.py), so that the report
says what went wrong rather than "module missing".

The record is a JSON file *beside* the extracted folder, `<folder>.notebook.json`, never
inside it: the sandboxed jobs work on copies of the folder's .py files and cannot write there,
and a student who hands in a folder (rather than a notebook) cannot put a map beside it.
Each module's entry carries the SHA-256 of the module text it describes; a map that does
not describe the module being graded is ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from grader import safe_io

SUFFIX = ".notebook.json"
MAP_BYTES = 1 << 20
# The first definition of a cell, by its line (linear: an earlier pattern that skipped the
# decorators above it backtracked for minutes on a cell of 30,000 decorator lines, in the
# grader's own process before any job started: red team).
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)
# The records are signed with a key of this installation's (KEY_FILE, made on first use,
# readable by its owner only): a student who hands in a file named
# `<classmate>.notebook.json` beside the classmate's folder wrote the classmate's record,
# and its "problem" zeroed them (red team). An unsigned or foreign record is ignored.
KEY_FILE = Path(__file__).resolve().parents[1] / "build" / "cellmap.key"


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


def write(folder: Path, modules: dict[str, tuple[str, list[Span]]],
          notes: list[str] | None = None, problem: str | None = None) -> Path:
    """Write the record of `folder`: module -> (its text, its spans), notes, problem."""
    data = {"modules": {m: {"sha256": digest(text), "spans": [asdict(s) for s in spans]}
                        for m, (text, spans) in sorted(modules.items())},
            "notes": list(notes or []), "problem": problem}
    data["signature"] = _sign(data, _key(create=True))
    path = path_for(folder)
    path.write_text(json.dumps(data, indent=1))
    return path


def _key(create: bool = False) -> bytes | None:
    """This installation's key for records; None when there is none (and `create` is
    false, or it cannot be made)."""
    try:
        return KEY_FILE.read_bytes()
    except OSError:
        if not create:
            return None
    try:
        KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(secrets.token_bytes(32))
    except FileExistsError:
        pass  # another process made it first
    except OSError:
        return None
    try:
        return KEY_FILE.read_bytes()
    except OSError:
        return None


def _sign(data: dict, key: bytes | None) -> str:
    body = json.dumps({k: v for k, v in data.items() if k != "signature"}, sort_keys=True)
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest() if key else ""


def _record(folder: Path) -> dict:
    """The record beside `folder`, if this installation signed it; else {}."""
    try:
        data = safe_io.read_json(path_for(folder), MAP_BYTES)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    key, signature = _key(), data.get("signature")
    if not key or not isinstance(signature, str) or not hmac.compare_digest(
            signature, _sign(data, key)):
        return {}
    return data


def read(folder: Path, modules: set[str]) -> dict[str, list[Span]]:
    """The spans of each of `modules` whose text in `folder` is the one the record
    describes; {} when there is no record, or it is not one."""
    data = _record(folder).get("modules")
    if not isinstance(data, dict):
        return {}
    found = {}
    for module in modules & set(data):
        entry = data[module]
        try:
            text = safe_io.read_bytes(Path(folder) / f"{module}.py", 8 << 20).decode()
            if not isinstance(entry, dict) or entry.get("sha256") != digest(text):
                continue
            found[module] = [_span(s) for s in entry["spans"]]
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return found


def _span(data: object) -> Span:
    """A Span from its JSON, every field of its type and every text cleaned (the record
    is a file: trusted for what it says only as far as it is well formed)."""
    if not isinstance(data, dict) or set(data) != set(Span.__dataclass_fields__):
        raise ValueError("not a span")
    for name, field_ in Span.__dataclass_fields__.items():
        value = data[name]
        if field_.type == "int" and (type(value) is not int or value < 0):
            raise ValueError(f"span {name}: not a count")
        if field_.type == "str":
            if not isinstance(value, str):
                raise ValueError(f"span {name}: not a text")
            data = {**data, name: safe_io.clean_text(value, 200)}
    return Span(**data)


def read_notes(folder: Path) -> tuple[list[str], str | None]:
    """(notes, problem) of the record beside `folder`; ([], None) without one."""
    data = _record(folder)
    notes = data.get("notes")
    problem = data.get("problem")
    notes = [safe_io.clean_text(n, 1000) for n in notes if isinstance(n, str)][:20] \
        if isinstance(notes, list) else []
    return notes, safe_io.clean_text(problem, 1000) if isinstance(problem, str) else None


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
