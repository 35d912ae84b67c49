"""Reports of a grading run: the terminal table, grades.csv and a JSON file per submission.

Names. A submission's name is its folder's name, which can be anything a file system
allows: bytes that are not UTF-8, spaces, control characters, `summary`. Every file
written for a submission is named by `safe_name(name)` (its id): the name itself when it
is plain ASCII letters, digits, `_`, `-` and `.`, not hidden and not one of the names the
reports use; otherwise a plain form of it with a hash of the original bytes appended, so
that two names never share a file (`a b` and `a_b`) and a name always gets the same id.
grades.csv shows the name escaped for display (`display_name`) beside its id.

The gradebook (`Gradebook`) is written as each submission finishes: its JSON, then
grades.csv rewritten whole through a temporary file and os.replace, so that an
interrupted run leaves every finished submission's grades. What an earlier run left in
the same folder is merged, never replaced: rows of submissions not graded now are kept
with the date they were graded, and in a submission graded again, an item this run does
not grade (another part, or not graded here, such as speed without a GPU) keeps its
earlier points, with a note saying so.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from grader import safe_io
from grader.checks import simperf
from grader.results import NESTED_NOTE, NOT_GRADED, SubmissionResult

# File names the reports use for themselves, in the output folder and in feedback/.
RESERVED = {"summary", "summary_totals", "grades", "index", "feedback", "gradescope",
            "con", "prn", "aux", "nul"}
JSON_BYTES = 64 << 20  # a submission's report read back (they are far smaller)
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}")
_HASHED = re.compile(r".*-[0-9a-f]{10}")


def _raw(name: str) -> bytes:
    """The name's original bytes (os.fsdecode's surrogate escapes undone)."""
    return name.encode("utf-8", "surrogateescape") if isinstance(name, str) else bytes(name)


def safe_name(name: str) -> str:
    """The id of a submission: a file name that is safe, unique and stable (see the module
    docstring)."""
    try:
        raw = _raw(name)
    except UnicodeEncodeError:  # lone surrogates other than escaped bytes
        raw = name.encode("utf-8", "surrogatepass")
    plain = (_PLAIN.fullmatch(name) and not name.endswith(".") and not _HASHED.fullmatch(name)
             and name.split(".")[0].lower() not in RESERVED)
    if plain:
        return name
    text = raw.decode("utf-8", "replace")
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._-")[:60] or "submission"
    return f"{stem}-{hashlib.sha256(raw).hexdigest()[:10]}"


def display_name(name: object) -> str:
    """A name for the terminal and grades.csv, on one line: undecodable bytes as \\xNN,
    newlines and tabs as \\n and \\t, other control characters and escape sequences
    removed."""
    return safe_io.clean_text(name, 200).replace("\n", "\\n").replace("\t", "\\t")


# What makes a spreadsheet read a cell as a formula (=HYPERLINK(...) in a submission's
# name would run when the instructor opens grades.csv): such text gets a leading quote.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """Text for a CSV cell that a spreadsheet shows as text, never runs as a formula (a
    text that starts with a quote gets one more, so that csv_value gives it back)."""
    return "'" + text if text.startswith((*FORMULA_STARTS, "'")) else text


def csv_value(cell: str) -> str:
    """The text csv_cell was given, from the cell it wrote."""
    return cell[1:] if cell.startswith("'") else cell


def _cell(points: float | None, max_points: float, status: str) -> str:
    if status == NOT_GRADED or points is None:
        return "n/g"
    return f"{points:g}/{max_points:g}"


PART_TITLES = {"gemm": "Part 1, GEMM", "net": "Part 2, the network", "mpi": "Part 3, MPI"}


def _header(item_id: str) -> str:
    short = item_id.split(".", 1)[1] if "." in item_id else item_id
    return short.replace(".correctness", "").replace(".performance", " speed")


def _grid(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a rich.table without colour: columns as wide as their widest cell, never
    wrapped or cut (a log has no width), cells as text (a name's `[b]` is no markup).
    Unlike str.ljust, rich counts terminal cells, so wide (CJK) names stay aligned."""
    # imported here: ~0.1 s, and only the end of a run prints a table
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False)
    for header in headers:
        grid.add_column(Text(header), no_wrap=True, overflow="ignore")
    for row in rows:
        grid.add_row(*(Text(cell) for cell in row))
    console = Console(file=io.StringIO(), width=100_000, color_system=None,
                      force_terminal=False, highlight=False, emoji=False, markup=False)
    console.print(grid)
    return [line.rstrip() for line in console.file.getvalue().splitlines()]


def table(results: list[SubmissionResult], backend: str) -> str:
    """Plain-text tables: one per part (a column per item), then the totals."""
    if not results:
        return "no submissions graded"
    ids_seen = list(dict.fromkeys(it.id for r in results for it in r.items))
    parts = list(dict.fromkeys(i.split(".")[0] for i in ids_seen))
    out = [f"Backend: {safe_io.one_line(backend)}"]
    for part in parts:
        ids = [i for i in ids_seen if i.startswith(part + ".")]
        rows = []
        for r in results:
            mine = {it.id: it for it in r.items if it.id in ids}
            graded = [it for it in mine.values() if it.points is not None]
            subtotal = (f"{sum(it.points for it in graded):g}/"
                        f"{sum(it.max_points for it in graded):g}")
            cells = [_cell(mine[i].points, mine[i].max_points, mine[i].status)
                     if i in mine else "-" for i in ids]
            rows.append([display_name(r.name)[:60], *cells, subtotal])
        out += ["", PART_TITLES.get(part, part)]
        out += _grid(["submission", *map(_header, ids), "part"], rows)
    if len(parts) > 1:
        out += ["", "Totals"]
        out += _grid(["submission", "total"],
                     [[display_name(r.name)[:60], f"{r.total:g}/{r.max_total:g}"]
                      for r in results])
    if any(it.status == NOT_GRADED for r in results for it in r.items):
        out.append("n/g = not graded in this run (performance needs a GPU); totals leave it out")
    return "\n".join(out)


def failures(results: list[SubmissionResult], limit: int = 400) -> str:
    """One line per item that lost points, with the grader's message (cut at `limit`)."""
    lines = []
    for r in results:
        for it in r.items:
            if it.points is not None and it.points < it.max_points:
                lines.append(f"{display_name(r.name)} / {it.id}: "
                             f"{safe_io.one_line(it.message, limit)}")
    return "\n".join(lines)


def details(results: list[SubmissionResult]) -> str:
    """Every item with every check, for a student reading their own results."""
    lines = []
    for r in results:
        lines.append(f"== {display_name(r.name)}")
        for it in r.items:
            points = "not graded" if it.points is None else f"{it.points:g}/{it.max_points:g}"
            lines.append(f"  {it.id}: {points}: {safe_io.clean_text(it.message, 2000)}")
            for check in it.checks:
                mark = {True: "ok  ", False: "FAIL"}.get(check.get("passed"), "    ")
                text = check.get("message") or (
                    f"{check['gflops']:.0f} GFLOP/s = {check['share_of_cublas']:.1%} of cuBLAS, "
                    f"{check['time_over_solution']:.2f}x the solution's time")
                lines.append(f"    {mark} {safe_io.one_line(check.get('case', ''), 120)}: "
                             f"{safe_io.clean_text(text, 2000)}")
            lines += ["    " + safe_io.one_line(line, 600)
                      for line in simperf.text_lines(it.figures.get(simperf.KEY))]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Files


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside path, then rename it over path: a reader
    (or a crash) sees the old file or the new one, never half of one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def to_json(result: SubmissionResult, notes: Iterable[str] = ()) -> dict:
    """The report of one submission: SubmissionResult.to_json() with its id, the time it
    was graded and its notes."""
    data = result.to_json()
    data["id"] = safe_name(result.name)
    data["graded_at"] = now()
    data["notes"] = [safe_io.clean_text(n, 2000) for n in notes]
    return data


def write_json(result: SubmissionResult | dict, path: Path) -> None:
    data = result if isinstance(result, dict) else to_json(result)
    write_atomic(path, json.dumps(data, indent=2, default=float))


def _is_report(data: object) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("name"), str)
            and isinstance(data.get("items"), list)
            and all(isinstance(it, dict) and isinstance(it.get("id"), str)
                    for it in data["items"]))


def read_report(path: Path) -> dict | None:
    """A submission's JSON report, or None if the file is not one."""
    try:
        data = safe_io.read_json(path, JSON_BYTES)
    except (OSError, ValueError):
        return None
    if not _is_report(data):
        return None
    data.setdefault("id", path.stem)
    if not isinstance(data.get("graded_at"), str):
        try:
            data["graded_at"] = time.strftime("%Y-%m-%d %H:%M:%S",
                                              time.localtime(path.stat().st_mtime))
        except OSError:
            data["graded_at"] = ""
    return data


def _takes_anothers_row(new: dict, old: dict) -> bool:
    """Would `new`, the report of a sub-folder graded as a submission of its own, replace
    the report of another folder? (A student's folder may hold a sub-folder named after a
    classmate: regraded alone, it must not overwrite the classmate's row. A submission
    named on the command line may: a student's folder regraded from a new download.)"""
    return (any(str(n).startswith(NESTED_NOTE) for n in new.get("notes", []))
            and old.get("path") != new.get("path"))


def merge_reports(new: dict, old: dict) -> dict:
    """`new` (this run's report of a submission) with the items of `old` (an earlier
    report of the same submission) that this run did not grade: items absent now, and
    items graded then but not graded now. Totals recomputed; a note says what was kept."""
    items = {it["id"]: it for it in new["items"]}
    kept = []
    for it in old["items"]:
        now_item = items.get(it["id"])
        graded_then = it.get("points") is not None
        if now_item is None or (now_item.get("points") is None and graded_then):
            if now_item is None:
                new["items"].append(it)
            else:
                new["items"][new["items"].index(now_item)] = it
            it.setdefault("graded_at", old.get("graded_at", ""))
            kept.append(it["id"])
    if kept:
        graded = [it for it in new["items"] if isinstance(it.get("points"), int | float)]
        new["total"] = sum(it["points"] for it in graded)
        new["max_total"] = sum(it.get("max_points", 0) for it in graded)
        new.setdefault("notes", []).append(
            f"{len(kept)} item(s) not graded in this run keep their points from the run of "
            f"{old.get('graded_at') or 'an earlier date'}: " + ", ".join(kept))
    return new


def _row_of(data: dict) -> dict:
    """What grades.csv needs of a report."""
    return {"name": data["name"], "id": data["id"], "graded_at": data.get("graded_at", ""),
            "points": {it["id"]: it.get("points") for it in data["items"]},
            "order": [it["id"] for it in data["items"]],
            "total": data.get("total"), "max_total": data.get("max_total")}


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else ""


def csv_text(rows: list[dict], item_ids: list[str] | None = None) -> str:
    """grades.csv: the name (escaped for display), the id, a column per item (the items
    of every row, first seen first), the totals and when each row was graded."""
    if item_ids is None:
        item_ids = list(dict.fromkeys(i for r in rows for i in r["order"]))
    lines: list[list[str]] = [["submission", "id", *item_ids, "total", "max_total", "graded"]]
    for r in sorted(rows, key=lambda r: (display_name(r["name"]), r["id"])):
        lines.append([csv_cell(display_name(r["name"])), csv_cell(r["id"]),
                      *[_number(r["points"].get(i)) for i in item_ids],
                      _number(r["total"]), _number(r["max_total"]), r["graded_at"]])
    buffer = io.StringIO()
    csv.writer(buffer).writerows(lines)
    return buffer.getvalue()


def write_csv(results: list[SubmissionResult], path: Path) -> None:
    """grades.csv of these results alone (Gradebook keeps a class's whole book)."""
    write_atomic(path, csv_text([_row_of(to_json(r)) for r in results]))


class Gradebook:
    """The reports in an output folder, kept up to date as submissions finish (see the
    module docstring)."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, dict] = {}  # id -> _row_of(report), earlier runs' included
        self.fresh: list[str] = []  # ids graded in this run, in order
        self.kept = 0
        for path in sorted(self.out.glob("*.json")):
            data = read_report(path)
            if data is not None:
                self.rows[path.stem] = _row_of({**data, "id": path.stem})
        self.earlier = len(self.rows)

    def add(self, result: SubmissionResult | dict, notes: Iterable[str] = ()) -> dict:
        """Write one finished submission's JSON (merged with an earlier report of it) and
        grades.csv; returns the report written."""
        data = result if isinstance(result, dict) else to_json(result, notes)
        path = self.out / f"{data['id']}.json"
        old = read_report(path) if path.exists() else None
        if old is not None and _takes_anothers_row(data, old):
            data, old = self._own_row(data), None
            path = self.out / f"{data['id']}.json"
        if old is not None and old.get("name") == data["name"]:
            data = merge_reports(data, old)
        elif old is not None:
            print(f"grader: {path.name} held the report of another submission "
                  f"({display_name(old['name'])}); replaced", file=sys.stderr)
        write_json(data, path)
        self.rows[data["id"]] = _row_of(data)
        if data["id"] not in self.fresh:
            self.fresh.append(data["id"])
        self.write_csv()
        return data

    def _own_row(self, data: dict) -> dict:
        """`data` under a name and id no report of this folder holds (a suffix '_')."""
        name, sid = data["name"], data["id"]
        while (self.out / f"{sid}.json").exists() or sid in self.rows:
            name, sid = name + "_", sid + "_"
        said = [safe_io.clean_text(x, 80) for x in (data["name"], data["id"], name)]
        data["notes"] = [*data.get("notes", []), (
            f"the folder's name, {said[0]}, is another submission's in this book "
            f"({said[1]}.json): graded as {said[2]}")]
        return {**data, "name": name, "id": sid}

    def write_csv(self) -> None:
        write_atomic(self.out / "grades.csv", csv_text(list(self.rows.values())))

    def reports(self) -> list[dict]:
        """Every report in the folder (this run's and earlier ones), by name."""
        found = []
        for sid in sorted(self.rows, key=lambda i: (display_name(self.rows[i]["name"]), i)):
            data = read_report(self.out / f"{sid}.json")
            if data is not None:
                data["id"] = sid
                found.append(data)
        return found
