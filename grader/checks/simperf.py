"""A performance lesson without a GPU: each GEMM kernel's memory traffic, counted in the
simulator (grader/worker/memcount.py), beside the solution's same version counted in the
same grading run. Feedback only: nothing here changes points.

The worker writes the raw counts of one profiled call (`profile.json`); this module turns
them into the figure `memory_traffic` of the kernel's correctness item, and lays that
figure out as a table for the feedback pages and as lines for `--details`:

- global sectors per load (store) request: 32-byte sectors a warp instruction touches,
  4 when 32 lanes read consecutive float32 values, 1 for a broadcast, 32 when every lane
  reads another row; and the same per array argument, which shows the operand at fault;
- bank conflicts per shared load (store) request: extra passes a shared access needs
  because lanes ask one bank for different words (0 is ideal; a column read with a
  stride of 32 words costs 31);
- global and shared loads per multiply-add: lane loads over the M*N*K multiply-adds of
  the product (the naive kernel loads twice per multiply-add; tiling divides that).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path

from grader import safe_io

KEY = "memory_traffic"  # the figure's name in an item's figures
PROFILE_FILE = "profile.json"  # as grader/worker/gemm.py writes them
PROFILE_ERROR = "profile.err"
NOT_POINTS = "for your information: these figures earn or cost no points"
LEGEND = ("Ideal: 4 sectors per request where 32 lanes read consecutive float32 values "
          "(1 for one value read by all, 32 when each lane reads another row), 0 bank "
          "conflicts; the fewer loads per multiply-add, the more each loaded value is "
          "reused (a naive GEMM: 2).")
# (key, column heading) of each figure, in table order.
METRICS = [
    ("sectors_per_load", "global sectors per load request"),
    ("sectors_per_store", "global sectors per store request"),
    ("sectors_by_argument", "sectors per request by argument"),
    ("conflicts_per_shared_load", "bank conflicts per shared load request"),
    ("conflicts_per_shared_store", "bank conflicts per shared store request"),
    ("global_loads_per_fma", "global loads per multiply-add"),
    ("shared_loads_per_fma", "shared loads per multiply-add"),
]
COUNT_FIELDS = ("launches", "global_load_requests", "global_load_accesses",
                "global_load_sectors", "global_store_requests", "global_store_accesses",
                "global_store_sectors", "shared_load_requests", "shared_load_accesses",
                "shared_load_conflicts", "shared_store_requests", "shared_store_accesses",
                "shared_store_conflicts", "threads", "storing_threads",
                "dynamic_shared_bytes", "shared_operand_elements", "operand_elements")
MAX_KERNELS = 8  # rows kept per side (a launcher may launch several kernels)
MAX_ARRAYS = 8  # array arguments kept per kernel
# The worker's counts of a few kernels take a few KiB: a larger file is not read.
MAX_PROFILE_BYTES = 256 << 10

Counts = dict[str, dict]  # kernel name -> memcount.KernelCounts.to_json()


def read_counts(outdir: Path, name: str = PROFILE_FILE,
                error_name: str = PROFILE_ERROR) -> tuple[Counts | None, str]:
    """The counts a worker wrote (the profiled call's, or `name`'s), or (None, why there
    are none)."""
    path, error = Path(outdir) / name, Path(outdir) / error_name
    # Both files are written by a worker that ran submitted code: read as any job's
    # result (regular files only, never through a link, within a size cap).
    if os.path.lexists(error):
        try:
            why = safe_io.read_text(error, 300)
        except (OSError, ValueError):
            why = "(unreadable)"
        return None, "the counted call failed: " + why
    if not os.path.lexists(path):
        return None, "not counted (the worker stopped before the counted call)"
    try:
        raw = safe_io.read_json(path, MAX_PROFILE_BYTES)["kernels"]
        counts = {str(name)[:80]: {**{f: int(c[f]) for f in COUNT_FIELDS},
                                   "arrays": _arrays(c.get("arrays", {}))}
                  for name, c in list(raw.items())[:MAX_KERNELS]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None, "not counted (unreadable counts)"
    if not counts:
        return None, "no kernel was launched in the counted call"
    return counts, ""


def _arrays(raw: dict) -> dict[str, list[int]]:
    """Per-argument counts: name -> [load requests, load sectors, store requests, store
    sectors]."""
    return {str(name)[:40]: [int(v) for v in values][:4]
            for name, values in list(raw.items())[:MAX_ARRAYS] if len(values) == 4}


def by_argument(arrays: dict[str, list[int]]) -> str:
    """'A load 1, B load 4, C store 4': sectors per request of each array argument."""
    parts = []
    for name, (load_requests, load_sectors, store_requests, store_sectors) in arrays.items():
        if load_requests:
            parts.append(f"{name} load {load_sectors / load_requests:.3g}")
        if store_requests:
            parts.append(f"{name} store {store_sectors / store_requests:.3g}")
    return ", ".join(parts)


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def metrics(c: dict, fmas: int) -> dict[str, float | str | None]:
    """The figures of one kernel's counts; `fmas`: multiply-adds of the counted call."""
    return {
        "sectors_per_load": _ratio(c["global_load_sectors"], c["global_load_requests"]),
        "sectors_per_store": _ratio(c["global_store_sectors"], c["global_store_requests"]),
        "sectors_by_argument": by_argument(c.get("arrays", {})),
        "conflicts_per_shared_load": _ratio(c["shared_load_conflicts"],
                                            c["shared_load_requests"]),
        "conflicts_per_shared_store": _ratio(c["shared_store_conflicts"],
                                             c["shared_store_requests"]),
        "global_loads_per_fma": _ratio(c["global_load_accesses"], fmas),
        "shared_loads_per_fma": _ratio(c["shared_load_accesses"], fmas),
    }


def figure(case_label: str, fmas: int, yours: tuple[Counts | None, str],
           solution: tuple[Counts | None, str]) -> dict:
    """The item figure: a row per kernel of the submission, then of the solution."""
    rows, notes = [], []
    for who, (counts, why) in (("yours", yours), ("solution", solution)):
        if counts is None:
            notes.append(f"{who}: {why}")
            continue
        for name, c in counts.items():
            rows.append({"who": who, "kernel": name, **metrics(c, fmas), "counts": c})
    return {"case": case_label, "note": NOT_POINTS, "rows": rows, "missing": notes}


# The solution's counts, once per grading run and kernel ------------------------------

_solution: dict[tuple[Hashable, str], tuple[Counts | None, str]] = {}
_locks: dict[tuple[Hashable, str], threading.Lock] = {}
_locks_lock = threading.Lock()


def solution_counts(run: Hashable, kernel: str,
                    measure: Callable[[], tuple[Counts | None, str]]) -> tuple[Counts | None, str]:
    """The solution's counts for `kernel` in the grading run `run` names (its secret):
    `measure()` the first time, by one thread, while the others asking for the same wait
    for it. (Keyed by the run, not by a submission's work folder: measured per submission,
    the solution's counting cost every submission a simulated launch per kernel.)"""
    key = (run, kernel)
    with _locks_lock:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _solution:
            try:
                _solution[key] = measure()
            except Exception as err:  # noqa: BLE001 - feedback only: never fail grading
                _solution[key] = (None, f"not counted ({type(err).__name__}: {err})"[:300])
        return _solution[key]


# Presentation (the figure read back from a result: tolerate anything) -----------------

def _number(value: object) -> str:
    if isinstance(value, str):
        return value[:200] or "–"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "–"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def table(value: object) -> tuple[list[str], list[list[str]], list[str]] | None:
    """(headers, rows, notes) of a `memory_traffic` figure, or None when there is none."""
    if not isinstance(value, dict) or not isinstance(value.get("rows"), list):
        return None
    headers = ["kernel", *(heading for _, heading in METRICS)]
    rows = []
    for row in value["rows"][:2 * MAX_KERNELS]:
        if isinstance(row, dict):
            rows.append([f"{row.get('who', '?')}: {row.get('kernel', '?')}",
                         *(_number(row.get(key)) for key, _ in METRICS)])
    notes = [f"Counted in the CUDA simulator on one call, {value.get('case', '?')}: "
             f"{value.get('note', NOT_POINTS)}.", LEGEND]
    missing = value.get("missing")
    notes += [n for n in (missing if isinstance(missing, list) else []) if isinstance(n, str)]
    return headers, rows, notes


def text_lines(value: object) -> list[str]:
    """The figure as plain lines (the command line's --details)."""
    laid = table(value)
    if laid is None:
        return []
    headers, rows, notes = laid
    lines = ["memory traffic, not points:"]
    for row in rows:
        lines.append("  " + row[0] + ": " + ", ".join(
            f"{h} {v}" for h, v in zip(headers[1:], row[1:], strict=True)))
    return lines + [f"  {n}" for n in notes]
