"""`python -m grader.handouts`: render handouts/*.md to build/handouts/*.html (`make
handouts`); --pdf also prints each page to PDF where Chromium is installed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.handouts.render import BrokenLinkError, build
from grader.reports.screenshot import ScreenshotError

KIT_ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.handouts",
                                     description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("--src", type=Path, default=KIT_ROOT / "handouts")
    parser.add_argument("--out", type=Path, default=KIT_ROOT / "build" / "handouts")
    parser.add_argument("--pdf", choices=("no", "yes", "auto"), default="no",
                        help="also NAME.pdf beside every page, printed by Chromium (auto: "
                             "where Chromium is installed)")
    args = parser.parse_args(argv)
    try:
        pages = build(args.src, args.out)
    except BrokenLinkError as err:
        print(f"grader.handouts: {err}", file=sys.stderr)
        return 1
    print(f"wrote {len(pages)} pages to {args.out}/", file=sys.stderr)
    if args.pdf != "no":
        from grader.handouts import pdf

        if not pdf.available():
            print("grader.handouts: no Chromium, so no PDF (apt install chromium, or set "
                  "CHROMIUM)", file=sys.stderr)
            return 1 if args.pdf == "yes" else 0
        try:
            for page in pages:
                pdf.print_pdf(page, page.with_suffix(".pdf"))
        except ScreenshotError as err:
            print(f"grader.handouts: {err}", file=sys.stderr)
            return 1
        print(f"printed {len(pages)} PDFs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
