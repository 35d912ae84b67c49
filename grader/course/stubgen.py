"""`make starter`: generate starter/ from solution/ (the one source of truth for stubs).

Every region between `### BEGIN SOLUTION` and `### END SOLUTION` becomes a stub at the
marker's indentation: the region's `# HINT:` comment lines are kept, and the code is
replaced by `raise NotImplementedError(...)` naming what to write. The function's
docstring gets a last line with the command that checks it and roughly how many lines
the solution takes (check_line); a function without a docstring gets one. Everything
else is copied unchanged.

    python -m grader.course.stubgen [--check] [SOLUTION_DIR STARTER_DIR]

With --check nothing is written; the exit status says whether starter/ is up to date.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from nnkit.submission import NAMED

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
HINT = re.compile(r"^\s*# HINT:")
DEF = re.compile(r"^\s*def (\w+)\(")


class MarkerError(ValueError):
    """Unbalanced or nested solution markers."""


def stub_source(source: str, name: str = "<source>",
                body: Callable[[str, str], str] | None = None) -> str:
    """The starter version of one solution module. `body(function, indent)`, when given,
    writes what replaces a region instead of the NotImplementedError (grader/dist.py's
    stand-ins for the kit's own copies of student functions)."""
    out: list[str] = []
    region: list[str] | None = None
    indent = ""
    function = "this part"
    def_at = 0
    in_signature = False
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if region is None:
            if match := DEF.match(line):
                function = f"{match.group(1)}()"
                in_signature = True
            if stripped == BEGIN:
                region, indent = [], line[: len(line) - len(line.lstrip())]
            elif stripped == END:
                raise MarkerError(f"{name}:{number}: {END} without {BEGIN}")
            else:
                out.append(line)
                if in_signature and line.split("#")[0].rstrip().endswith(":"):
                    def_at, in_signature = len(out), False  # the body's first line
            continue
        if stripped == BEGIN:
            raise MarkerError(f"{name}:{number}: nested {BEGIN}")
        if stripped == END:
            if body is not None:
                out.append(body(function.rstrip("()"), indent))
            else:
                tail = check_line(function.rstrip("()"), _code_lines(region))
                if tail and "Check:" not in "".join(out[def_at:]):
                    _end_docstring(out, def_at, indent, tail)
                out.extend(h for h in region if HINT.match(h))
                out.append(f'{indent}raise NotImplementedError("write {function}")\n')
            region = None
            continue
        region.append(line)
    if region is not None:
        raise MarkerError(f"{name}: {BEGIN} without {END}")
    return "".join(out)


def _code_lines(region: list[str]) -> int:
    return sum(1 for line in region if line.strip() and not line.strip().startswith("#"))


def check_line(function: str, lines: int) -> str | None:
    """`Check: <command> (about N lines).` for a stub: the quick check of the function's
    item (grader/student.py), or its GEMM kernel's, and the solution's length, rounded;
    None for a function no item checks (the kit's optional exercises say their own)."""
    from grader.selection import function_items

    base = function.removesuffix("_kernel")
    if base.startswith("gemm_"):
        command = f"make check PART=gemm KERNEL={base.removeprefix('gemm_')}"
    elif base in function_items():
        command = f"make check FUNCTION={base}"
    else:
        return None
    size = "a few lines" if lines <= 5 else f"about {5 * round(lines / 5)} lines"
    return f"Check: `{command}` ({size})."


def _end_docstring(out: list[str], def_at: int, indent: str, text: str) -> None:
    """`text` as the last paragraph of the docstring opening at out[def_at] (the function's
    first body line); a function without one gets a docstring of `text`."""
    quote = '"' * 3
    if def_at >= len(out) or not out[def_at].strip().startswith(quote):
        out.insert(def_at, f"{indent}{quote}{text}{quote}\n")
        return
    for at in range(def_at, len(out)):
        line = out[at].rstrip("\n")
        start = line.index(quote) + 3 if at == def_at else 0
        end = line.find(quote, start)
        if end < 0:
            continue
        head = line[:end].rstrip()
        out[at:at + 1] = [*([head + "\n"] if head.strip() else []), "\n",
                          f"{indent}{text}{quote}\n"]
        return


def expected_files(solution: Path) -> dict[str, str]:
    """File name -> the text starter/ must hold for it."""
    return {p.name: stub_source(p.read_text(), str(p)) for p in sorted(solution.glob("*.py"))}


def stale_files(solution: Path, starter: Path) -> list[str]:
    """Names of starter files that are missing, different, or have no solution module."""
    expected = expected_files(solution)
    present = {p.name for p in starter.glob("*.py")} if starter.is_dir() else set()
    stale = [n for n, text in expected.items()
             if n not in present or (starter / n).read_text() != text]
    return sorted(stale + sorted(present - expected.keys()))


def write_starter(solution: Path, starter: Path) -> None:
    starter.mkdir(parents=True, exist_ok=True)
    expected = expected_files(solution)
    for extra in {p.name for p in starter.glob("*.py")} - expected.keys():
        (starter / extra).unlink()
    for name, text in expected.items():
        (starter / name).write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files")
    parser.add_argument("solution", nargs="?", type=Path, default=NAMED["solution"])
    parser.add_argument("starter", nargs="?", type=Path, default=NAMED["starter"])
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.solution, args.starter)
        if stale:
            print(f"starter/ is out of date ({', '.join(stale)}): run `make starter`",
                  file=sys.stderr)
            return 1
        return 0
    write_starter(args.solution, args.starter)
    print(f"wrote {args.starter}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
