"""`python -m grader.handouts.figures [--out handouts/img]`: draw the handouts' diagrams."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.handouts.figures import draw_all

KIT_ROOT = Path(__file__).resolve().parents[3]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.handouts.figures",
                                     description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("--out", type=Path, default=KIT_ROOT / "handouts" / "img")
    args = parser.parse_args(argv)
    for path in draw_all(args.out):
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
