"""The handouts' Python snippets run: every ```python block not marked `<!-- no-run -->`
is run on its own, from the kit's root, by this interpreter (those that use mpi4py also
on 2 ranks), and must exit cleanly. The snippets assert what they show."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.handouts.snippets import all_snippets, snippets
from tests.conftest import KIT_ROOT

HANDOUTS = KIT_ROOT / "handouts"
SNIPPETS = all_snippets(HANDOUTS)
RUNNABLE = [s for s in SNIPPETS if s.runs]
MAX_NO_RUN = 3  # fragments that cannot run: keep the list short


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=KIT_ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("snippet", RUNNABLE, ids=[s.where for s in RUNNABLE])
def test_snippet_runs(snippet, tmp_path):
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code)
    done = _run([sys.executable, str(script)])
    assert done.returncode == 0, f"{snippet.where}:\n{done.stderr[-2000:]}"
    if "mpi4py" in snippet.code:
        from nnkit.collectives import find_mpiexec, mpiexec_command, rank_environment

        if find_mpiexec() is None:
            pytest.skip("no mpiexec")
        done = subprocess.run([*mpiexec_command(2), sys.executable, str(script)],
                              cwd=KIT_ROOT, capture_output=True, text=True, timeout=120,
                              env=rank_environment())
        assert done.returncode == 0, f"{snippet.where} on 2 ranks:\n{done.stderr[-2000:]}"


def test_snippets_are_found_and_few_are_exempt():
    assert len(RUNNABLE) >= 2, [s.where for s in SNIPPETS]
    exempt = [s for s in SNIPPETS if not s.runs]
    assert len(exempt) <= MAX_NO_RUN, [s.where for s in exempt]
    assert all(s.reason for s in exempt), "say why a snippet does not run"


def test_no_run_marker_applies_to_the_next_block_only(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n<!-- no-run: a fragment -->\n```python\nf(x)\n```\n\n"
                    "```python\nprint(1)\n```\n\n```sh\nmake test\n```\n")
    found = snippets(page)
    assert [(s.line, s.runs, s.reason) for s in found] == [(4, False, "a fragment"),
                                                           (8, True, "")]
    assert found[1].code == "print(1)\n"
