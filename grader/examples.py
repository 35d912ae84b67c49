"""Example submissions made from the solution by small, described edits.

A spec is a TOML file:

    description = "what the student got wrong"
    loses = ["gemm.shared.correctness"]      # the items it must lose
    may_lose = ["net.accuracy"]              # items it may lose too, depending on magnitude
    [[edit]]
    file = "gemm_2_shared.py"
    old = "exact text in the solution"       # must occur exactly once
    new = "the buggy text"

Keeping bugs as edits means they follow the solution as it evolves, and a spec whose
`old` text disappears fails loudly instead of silently testing nothing.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from nnkit.submission import NAMED

BUG_DIR = Path(__file__).resolve().parents[1] / "examples" / "bugs"


class SpecError(ValueError):
    """A bug spec that does not apply to the current solution."""


@dataclass(frozen=True)
class BugSpec:
    name: str
    description: str
    loses: tuple[str, ...]
    may_lose: tuple[str, ...]
    edits: tuple[dict, ...]


def load_spec(path: Path) -> BugSpec:
    raw = tomllib.loads(path.read_text())
    return BugSpec(path.stem, raw["description"], tuple(raw.get("loses", ())),
                   tuple(raw.get("may_lose", ())), tuple(raw.get("edit", ())))


def all_specs(folder: Path = BUG_DIR) -> list[BugSpec]:
    return [load_spec(p) for p in sorted(folder.glob("*.toml"))]


def materialize(spec: BugSpec, dest_root: Path) -> Path:
    """Write the submission folder dest_root/<name>: the solution's modules, edited."""
    dest = dest_root / spec.name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for module in NAMED["solution"].glob("*.py"):
        shutil.copy(module, dest / module.name)
    for edit in spec.edits:
        target = dest / edit["file"]
        text = target.read_text()
        count = text.count(edit["old"])
        if count != 1:
            raise SpecError(f"{spec.name}: {edit['file']} holds the text to replace "
                            f"{count} times, expected once:\n{edit['old']}")
        target.write_text(text.replace(edit["old"], edit["new"]))
    return dest


def materialize_all(dest_root: Path, folder: Path = BUG_DIR) -> list[Path]:
    return [materialize(spec, dest_root) for spec in all_specs(folder)]
