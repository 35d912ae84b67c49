"""The source policy of Part 2 (and Part 1) is read from the grader's copy *before* the
job runs: the job runs as the copy's owner and may rewrite its own files, so a module
that hides its breach by rewriting itself at import must still be judged on what it was."""

import shutil

from grader.isolation.runner import WorkerRun
from grader.parts import net as net_part
from grader.scoring import load_config
from nnkit.submission import NAMED
from tests.conftest import TESTS

CHEAT = TESTS / "cheats_net" / "rewrite_source"


def _rewriting_worker(calls: list):
    """run_worker's stand-in: what rewrite_source does at import, then no results."""
    def run(job, workdir, timeout, on_gpu, **kw):
        copy = workdir / "submission"
        clean = (NAMED["solution"] / "net_2_backprop.py").read_text()
        (copy / "net_2_backprop.py").write_text(clean)
        calls.append(job.kind)
        out = workdir / "out"
        out.mkdir(parents=True, exist_ok=True)
        return WorkerRun(out, 0, False, "", "fake", 1.0)
    return run


def test_a_module_that_rewrites_itself_is_judged_on_what_it_was(tmp_path, monkeypatch):
    submission = shutil.copytree(NAMED["solution"], tmp_path / "sub")
    for path in CHEAT.iterdir():
        shutil.copy(path, submission / path.name)
    calls: list = []
    monkeypatch.setattr(net_part, "run_worker", _rewriting_worker(calls))
    items = {i.id: i for i in net_part.grade_units(submission, tmp_path / "w", load_config(),
                                                   False)}
    assert calls == ["net_units"]
    for item_id in net_part.BACKPROP_ITEMS:
        assert "rules for graded code" in items[item_id].message, items[item_id].message
        assert "nnkit import network" in items[item_id].message
    assert "rules for graded code" not in items["net.kernels"].message  # the other module
