"""`make starter`: generate starter/ from solution/ (the one source of truth for stubs).

Every region between `### BEGIN SOLUTION` and `### END SOLUTION` becomes a stub at the
marker's indentation: the region's `# HINT:` comment lines are kept, and the code is
replaced by `raise NotImplementedError(...)` naming what to write. Everything outside
the markers is copied unchanged.

    python -m grader.course.stubgen [--check] [SOLUTION_DIR STARTER_DIR]

With --check nothing is written; the exit status says whether starter/ is up to date.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from nnkit.submission import NAMED

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
HINT = re.compile(r"^\s*# HINT:")
DEF = re.compile(r"^\s*def (\w+)\(")


class MarkerError(ValueError):
    """Unbalanced or nested solution markers."""


def stub_source(source: str, name: str = "<source>") -> str:
    """The starter version of one solution module."""
    out: list[str] = []
    region: list[str] | None = None
    indent = ""
    function = "this part"
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if region is None:
            if match := DEF.match(line):
                function = f"{match.group(1)}()"
            if stripped == BEGIN:
                region, indent = [], line[: len(line) - len(line.lstrip())]
            elif stripped == END:
                raise MarkerError(f"{name}:{number}: {END} without {BEGIN}")
            else:
                out.append(line)
            continue
        if stripped == BEGIN:
            raise MarkerError(f"{name}:{number}: nested {BEGIN}")
        if stripped == END:
            out.extend(h for h in region if HINT.match(h))
            out.append(f'{indent}raise NotImplementedError("write {function}")\n')
            region = None
            continue
        region.append(line)
    if region is not None:
        raise MarkerError(f"{name}: {BEGIN} without {END}")
    return "".join(out)


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
