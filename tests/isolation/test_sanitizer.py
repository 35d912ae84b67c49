"""The optional compute-sanitizer pass of Part 1: reading the tool's report, folding it
into the item, and running the worker under it (with a stand-in tool: no GPU here)."""

import dataclasses
import stat

import pytest

from grader.cases.gemm import GemmCase
from grader.isolation import sandbox, sanitizer
from grader.parts import gemm as part1
from grader.scoring import ConfigError, load_config
from nnkit.submission import NAMED

CLEAN = """numba: compiling...
========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""
OUT_OF_BOUNDS = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at gemm_naive_kernel+0x2b0
=========     by thread (16,0,0) in block (1,0,0)
========= Invalid __global__ write of size 4 bytes
========= ERROR SUMMARY: 2 errors
"""
RACE = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at tile_kernel+0x1a0
=========     and Read access at tile_kernel+0x230 [8 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_a_clean_run_is_clean():
    report = sanitizer.parse("memcheck", CLEAN, 0)
    assert report.clean and "no errors" in report.describe()


def test_errors_are_counted_and_described():
    report = sanitizer.parse("memcheck", OUT_OF_BOUNDS, 0)
    assert report.errors == 2 and not report.clean
    assert "Invalid __global__ write of size 4 bytes" in report.describe()
    race = sanitizer.parse("racecheck", RACE, 0)
    assert race.errors == 1 and "Race reported" in race.describe()


@pytest.mark.parametrize("output, returncode", [
    (CLEAN, -9),  # the submission printed the line, then killed the tool
    (CLEAN + "worker output after the summary\n", 0),  # not the tool's last word
    ("numba: compiling...\n", 0),  # no summary at all
], ids=["killed", "not-last", "none"])
def test_no_trustworthy_summary_is_not_a_clean_bill(output, returncode):
    report = sanitizer.parse("memcheck", output, returncode)
    assert report.errors is None and not report.clean
    assert "gave no summary" in report.describe()


def _config(**changes):
    return dataclasses.replace(load_config(), **changes)


def test_findings_fail_the_item_only_when_the_config_says_so():
    found = [sanitizer.parse("memcheck", CLEAN, 0), sanitizer.parse("racecheck", RACE, 0)]
    checks, figures = [], {}
    correct, message = part1.apply_sanitizer(found, "", True, "all cases pass",
                                             _config(sanitizer_findings_fail=True), checks,
                                             figures)
    assert not correct and "Race reported" in message
    assert [c["passed"] for c in checks] == [True, False] and len(figures["sanitizer"]) == 2
    correct, message = part1.apply_sanitizer(found, "", True, "all cases pass", _config(),
                                             [], {})
    assert correct and "not counted here" in message
    correct, message = part1.apply_sanitizer([found[0]], "", True, "ok", _config(), [], {})
    assert correct and message.endswith("compute-sanitizer: no findings")
    correct, message = part1.apply_sanitizer([], "compute-sanitizer not found", False, "bad",
                                             _config(sanitizer_findings_fail=True), [], {})
    assert not correct and message == "bad; compute-sanitizer not found"


def test_unknown_tools_are_refused_by_the_config(tmp_path):
    text = (NAMED["solution"].parent / "grader" / "config.toml").read_text()
    bad = tmp_path / "config.toml"
    bad.write_text(text.replace("gpu_sanitizer = []", 'gpu_sanitizer = ["leakcheck"]'))
    with pytest.raises(ConfigError, match="leakcheck"):
        load_config(bad)
    load_config()  # back to the kit's settings for the rest of the session


FAKE_TOOL = """#!/bin/sh
# Stands in for compute-sanitizer: skips its options, runs the worker, then reports.
tool=memcheck
while [ "${1#--}" != "$1" ]; do
    [ "$1" = --tool ] && tool=$2
    shift 2
done
"$@"
status=$?
if [ "$tool" = racecheck ]; then
    echo "========= Error: Race reported between Write access at k+0x10 and Read access"
    echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
else
    echo "========= ERROR SUMMARY: 0 errors"
fi
exit $status
"""


def test_the_worker_runs_under_the_tool_and_its_report_is_read(tmp_path, monkeypatch):
    tool = tmp_path / "compute-sanitizer"
    tool.write_text(FAKE_TOOL)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    config = _config(sanitizer_tools=("memcheck", "racecheck"), sanitizer_path=str(tool),
                     seconds_sanitizer=120)  # (loading a config also sets the sandbox)
    # The stand-in lives in the temp folder, which the full sandbox hides from jobs.
    saved = sandbox.current()
    sandbox.use(dataclasses.replace(saved, mode="off"))
    monkeypatch.setattr(sanitizer, "cases", lambda: [GemmCase(3, 2, 4, 2.0, 5.0, seed=1)])
    try:
        reports, note = part1.sanitizer_reports("naive", NAMED["solution"], tmp_path / "work",
                                                config, on_gpu=False)
    finally:
        sandbox.use(saved)
    assert note == ""
    assert [(r.tool, r.errors) for r in reports] == [("memcheck", 0), ("racecheck", 1)]


def test_a_missing_tool_is_said_not_guessed(tmp_path):
    config = _config(sanitizer_tools=("memcheck",), sanitizer_path=str(tmp_path / "nothing"))
    reports, note = part1.sanitizer_reports("naive", NAMED["solution"], tmp_path, config,
                                            on_gpu=False)
    assert reports == [] and "not found" in note
