"""Messages as the student should read them: files named relative to the submission, and
lines of a notebook's extracted modules given as the notebook's cells.

Every job works in a copy of the submission under the run's temporary folder, so an
error text can hold `/tmp/grader-x1y2/alice/naive/submission/gemm_1_naive.py` (a module
that is missing, a numba error quoting its file): that becomes `gemm_1_naive.py`. The
private package a submission's modules are loaded under (nnkit/submission.py,
`_nnkit_impl_<hash>`) is dropped from module names. When the submission was extracted
from a notebook, `gemm_1_naive.py, line 12` becomes `cell 7 of part1-gemm.ipynb
[gemm_naive, id gemm_1_naive-2], line 3` (grader/cellmap.py).

`relocate` rewrites a whole SubmissionResult in place, once, before any report is
written: the only place where this is done.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from grader import cellmap
from grader.nbextract import MODULES
from grader.results import SubmissionResult

_PACKAGE = re.compile(r"_nnkit_impl_[0-9a-f]{12}\.?")
_PATH_CHARS = r"[^\s'\"()\[\]{},;:<>]"
_TEMP_NAME = re.compile(r"(?:grader|nbcourse)-[a-z0-9_]{6,}")  # tempfile.mkdtemp(prefix=...)
# A module's line as messages give it: "m.py, line 12", "m.py:12" (the checker's
# findings), 'File "m.py", line 12' (numba and Python tracebacks)
_LINE = re.compile(r"\b(?P<module>[a-z0-9_]+)\.py(?:\"?, line |:)(?P<line>\d+)")


def path_stripper(roots: list[Path]) -> Callable[[str], str]:
    """A function that rewrites every path under one of `roots`, as the part after its
    last `submission/` when it has one, else as `…/` and its last two parts. A root is matched as an
    absolute path and, where its last component is a temporary folder's random name
    (`grader-x1y2...`), also inside a relative path (numba prints `../../tmp/grader-...`)."""
    names = sorted({os.fspath(r).rstrip("/") for r in roots if os.fspath(r).strip("/")},
                   key=len, reverse=True)
    if not names:
        return lambda text: text
    alternatives = [re.escape(n) for n in names]
    # A relative path starts where a token starts (the lookbehind): tried there only, so
    # that a long token costs one pass, not one per character.
    alternatives += [rf"(?<!{_PATH_CHARS})(?:{_PATH_CHARS}*/)?{re.escape(Path(n).name)}"
                     for n in names if _TEMP_NAME.fullmatch(Path(n).name)]
    pattern = re.compile(rf"(?:{'|'.join(alternatives)})(?![^/\s'\"()\[\]{{}},;:<>])"
                         rf"(?:/{_PATH_CHARS}*)?")

    def short(match: re.Match) -> str:
        path = match.group()
        if "/submission/" in path:
            return path.rsplit("/submission/", 1)[1]
        for root in names:  # the graded folder itself: relative to it
            if path.startswith(root + "/") and not _TEMP_NAME.fullmatch(Path(root).name):
                return path[len(root) + 1:]
        # Outside the submission (a grader's folder): its last two parts, marked as
        # elided, so that "outside its folder" still shows where.
        parts = Path(path).parts[-2:]
        return "…/" + "/".join(parts) if len(parts) == 2 else (Path(path).name or path)

    return lambda text: pattern.sub(short, text)


def cell_rewriter(spans: dict[str, list[cellmap.Span]]) -> Callable[[str], str]:
    """A function that rewrites "module.py, line N" as the notebook cell it came from."""
    def cell(match: re.Match) -> str:
        found = cellmap.locate(spans.get(match["module"], []), int(match["line"]))
        return match.group() if found is None else cellmap.describe(*found)

    return (lambda text: _LINE.sub(cell, text)) if spans else (lambda text: text)


def rewriter(roots: list[Path], folder: Path | None) -> Callable[[str], str]:
    """The rewriting of one submission's messages (roots: folders whose paths must not
    show; folder: the graded folder, whose cell map is used when there is one)."""
    strip = path_stripper(roots)
    cells = cell_rewriter(cellmap.read(folder, MODULES) if folder else {})
    return lambda text: cells(strip(_PACKAGE.sub("", text)))


def _walk(value: object, fix: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, list):
        return [_walk(v, fix) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, fix) for v in value)
    if isinstance(value, dict):
        return {k: _walk(v, fix) for k, v in value.items()}
    return value


def relocate(result: SubmissionResult, roots: list[Path], folder: Path | None) -> None:
    """Rewrite every message, check row and figure text of `result` in place."""
    fix = rewriter(roots, folder)
    for item in result.items:
        item.message = fix(item.message)
        item.checks = _walk(item.checks, fix)  # type: ignore[assignment]
        item.figures = _walk(item.figures, fix)  # type: ignore[assignment]
