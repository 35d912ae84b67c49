"""GRADER_PROFILE: the worker's phases (wall and CPU seconds at each mark) turned into one
JSON line per job by the runner (for the grader's developers; nothing graded reads it)."""

import json
import time

from grader.isolation import profiling
from grader.worker import common
from grader.worker.jobs import GemmJob, NetJob


def test_marks_carry_wall_and_cpu_seconds(monkeypatch):
    monkeypatch.setattr(common, "PHASES", [])
    common.mark("imports")
    sum(range(200_000))  # some CPU between the marks
    common.mark("set-up")
    (name, wall, cpu), (_, wall2, cpu2) = common.PHASES
    assert name == "imports" and wall2 >= wall and cpu2 > cpu


def test_profile_lines_give_each_phase_its_seconds_and_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv(profiling.PROFILE, str(tmp_path / "profile.jsonl"))
    results = tmp_path / "out"
    results.mkdir()
    now = time.time()
    (results / "phases.json").write_text(json.dumps(
        [["start", now + 1.0, 0.25], ["imports", now + 1.5, 0.5], ["old-style", now + 2.0]]))
    profiling.write_profile(GemmJob(module="m"), results, now - 0.5, now, 2.0, 1.75)
    line = json.loads((tmp_path / "profile.jsonl").read_text())
    assert line["cpu_children"] == 1.75 and line["worker_seconds"] == 2.0
    assert line["steps"]["sandbox"] == 0.5
    assert line["steps"]["start"] == 1.0 and line["steps"]["imports"] == 0.5
    assert line["steps"]["old-style"] == 0.5  # a phase without CPU keeps its wall time
    assert line["steps_cpu"] == {"start": 0.25, "imports": 0.25}


def test_a_profiled_block_leaves_its_costliest_functions_for_the_runner(tmp_path, monkeypatch):
    def busy():
        return sum(range(300_000))

    with common.Profiled({"cprofile": True}, tmp_path):
        busy()
    with common.Profiled({}, tmp_path / "missing"):  # off: nothing written, no folder needed
        busy()
    assert "busy" in (tmp_path / "cprofile.txt").read_text()
    monkeypatch.setenv(profiling.PROFILE, str(tmp_path / "profile.jsonl"))
    monkeypatch.setenv(profiling.CPROFILE, "1")
    profiling.write_profile(NetJob(kind="net_units"), tmp_path, time.time(), time.time(), 1.0, 1.0)
    text = (tmp_path / "profile.jsonl.cprofile.txt").read_text()
    assert text.startswith("=== net_units") and "busy" in text
