"""Grade the differently written correct submissions of this folder (alt_*/ and
notebooks/*.ipynb) as whole submissions: each folder holds the modules of the parts it
exercises, and the solution's modules fill in the others.

    python tests/policy/grade_alternatives.py --out DIR [--only NAME,...] [grader options]

stages the submissions under DIR/subs and runs `python -m grader` on them with the other
options (`--parts`, `--jobs`, `--seed`, ...), writing the reports into DIR/grades. Every
graded item of every alternative should get its points; the command prints those that
did not and exits with status 1 if there are any. tests/checks/test_alternatives_graded.py
does the same in the simulator; on a GPU this also grades speed (items that are graded
relative to the solution: an alternative may be slower and keep its correctness points).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KIT_ROOT = HERE.parents[1]
MODULES = {"gemm": ("gemm_1_naive", "gemm_2_shared", "gemm_3_register"),
           "net": ("net_1_kernels", "net_2_backprop"),
           "mpi": ("mpi_1_data_parallel", "mpi_2_ring")}
NOTEBOOK_PARTS = {"alt_gemm_notebook": ("gemm",), "alt_net_notebook": ("net",)}


def names() -> list[str]:
    folders = sorted(p.name for p in HERE.glob("alt_*") if p.is_dir())
    return folders + sorted(NOTEBOOK_PARTS)


def parts_of(name: str) -> tuple[str, ...]:
    """The parts an alternative writes; one that writes the network is graded with Part 3
    too, since mpi.combined trains that network under MPI."""
    if name in NOTEBOOK_PARTS:
        return NOTEBOOK_PARTS[name]
    folder = HERE / name
    own = {part for part, modules in MODULES.items()
           if any((folder / f"{m}.py").is_file() for m in modules)}
    if "net" in own:
        own.add("mpi")
    return tuple(part for part in MODULES if part in own)


def stage(name: str, dest: Path) -> Path:
    """A copy of the alternative under `dest`, with the solution's missing modules."""
    dest.mkdir(parents=True, exist_ok=True)
    if name in NOTEBOOK_PARTS:
        return Path(shutil.copy(HERE / "notebooks" / f"{name}.ipynb", dest))
    folder = shutil.copytree(HERE / name, dest / name, dirs_exist_ok=True)
    for module in (KIT_ROOT / "solution").glob("*.py"):
        if not (folder / module.name).exists():
            shutil.copy(module, folder / module.name)
    return folder


def lost_points(report: dict, parts: tuple[str, ...]) -> list[str]:
    """The graded items of `parts` that did not get their points (speed excepted)."""
    return [f"{item['id']}: {item['points']}/{item['max_points']}: {item['message'][:300]}"
            for item in report["items"]
            if item["id"].split(".")[0] in parts and item["status"] != "not graded"
            and not item["id"].endswith("performance")
            and item["points"] != item["max_points"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="", help="comma-separated names (default: all)")
    args, grader_args = parser.parse_known_args(argv)
    chosen = [n for n in names() if not args.only or n in args.only.split(",")]
    subs = [stage(name, args.out / "subs") for name in chosen]
    command = [sys.executable, "-m", "grader", *map(str, subs), *grader_args,
               "--out", str(args.out / "grades")]
    status = subprocess.run(command, cwd=KIT_ROOT).returncode
    bad = 0
    for name in chosen:
        path = args.out / "grades" / f"{name}.json"
        if not path.is_file():
            print(f"{name}: no report", file=sys.stderr)
            bad += 1
            continue
        for line in lost_points(json.loads(path.read_text()), parts_of(name)):
            print(f"{name} / {line}", file=sys.stderr)
            bad += 1
    print(f"{bad} item(s) lost points" if bad else
          f"all {len(chosen)} alternatives kept every graded point", file=sys.stderr)
    return 1 if bad or status else 0


if __name__ == "__main__":
    sys.exit(main())
