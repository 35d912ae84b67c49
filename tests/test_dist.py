"""The student distribution: what it holds, that nothing secret leaks into it, and that
`make check` and `make test` work from the unpacked archive."""

import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from grader.course import dist
from grader.course.hidden import HIDDEN
from grader.course.stubgen import stub_source
from grader.parts import gemm as part1
from grader.results import NOT_GRADED, ItemResult
from grader.student import NO_SOLUTION, without_solution
from nnkit.checks import VISIBLE, check
from nnkit.submission import NAMED, load_function
from tests.conftest import KIT_ROOT


def _committed_kit(dest):
    """The kit as committed (what CI's clone holds): work in progress in the working tree,
    shared with other developers, stays out. Outside a git checkout, the tree itself."""
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=KIT_ROOT,
                             capture_output=True)
    if archive.returncode != 0:
        return KIT_ROOT
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    kit = _committed_kit(tmp_path_factory.mktemp("kit"))
    root, archive = dist.build(tmp_path_factory.mktemp("dist"), kit)
    return kit, root, archive


@pytest.fixture(scope="module")
def unpacked(built, tmp_path_factory):
    dest = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(built[2]) as tar:
        tar.extractall(dest, filter="data")
    return dest / dist.NAME


def test_distribution_holds_what_students_need(built):
    kit, root, _ = built
    modules = sorted(p.name for p in (kit / "solution").glob("*.py"))
    assert modules and sorted(p.name for p in (root / "starter").glob("*.py")) == modules
    for path in ("README.md", "Makefile", "pyproject.toml", "tests/test_visible.py",
                 "nnkit/checks.py", "grader/student.py", "grader/config.toml",
                 "handouts/part1-gemm.md"):
        assert (root / path).is_file(), path
    assert len(list((root / "nnkit" / "data" / "sample").glob("*.gz"))) == 4
    for stub in (root / "starter").glob("*.py"):
        assert "NotImplementedError" in stub.read_text()


def test_no_solution_and_no_hidden_check_ships(built):
    kit, root, archive = built
    assert dist.find_leaks(root, kit / "solution") == []
    shipped = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert not any(p.startswith(("solution/", "examples/")) or "/bugs/" in p for p in shipped)
    assert not any(p.startswith(f"grader/{name}/")
                   for name in dist.INSTRUCTOR_ONLY for p in shipped)
    assert "grader/parts/gemm.py" in shipped  # the stage packages ship
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, path
        assert all(repr(cases) not in text for cases in HIDDEN.values()), path
    with tarfile.open(archive) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    assert names == shipped


def test_kit_copies_of_student_functions_ship_as_stubs(built, tmp_path):
    kit, root, _ = built
    marked = [p for p in (kit / "nnkit").rglob("*.py") if "### BEGIN SOLUTION" in p.read_text()]
    for path in marked:
        shipped = root / path.relative_to(kit)
        assert shipped.read_text() == stub_source(path.read_text())
    # And the mechanism itself, on a planted file.
    copy = shutil.copytree(root, tmp_path / "copy")
    (copy / "nnkit" / "twin.py").write_text(
        "def f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION\n")
    assert dist.stub_kit_answers(copy) == ["nnkit/twin.py"]
    assert "42" not in (copy / "nnkit" / "twin.py").read_text()


def test_the_leak_scan_finds_planted_secrets(built, tmp_path):
    kit, root, _ = built
    copy = shutil.copytree(root, tmp_path / "copy")
    region = next(r for r in dist.solution_regions(kit / "solution") if len(r) > 3)
    (copy / "handouts" / "extra.md").write_text("\n".join(["```", *region, "```"]))
    (copy / "nnkit" / "extra.py").write_text(f"CASES = {HIDDEN['gemm_naive']!r}\n")
    leaks = dist.find_leaks(copy, kit / "solution")
    assert any(leak.startswith("handouts/extra.md") for leak in leaks)
    assert any(leak.startswith("nnkit/extra.py: hidden check") for leak in leaks)
    with pytest.raises(dist.LeakError):
        dist.assert_no_leak(copy, kit / "solution")


def test_make_check_in_the_unpacked_distribution_gives_zero(unpacked):
    result = subprocess.run(["make", "check", f"PY={sys.executable}", "JOBS=2"], cwd=unpacked,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader(open(unpacked / "build" / "check" / "grades.csv")))
    assert [r["submission"] for r in rows] == ["starter"]
    assert float(rows[0]["total"]) == 0 and float(rows[0]["max_total"]) > 0
    report = json.loads((unpacked / "build" / "check" / "starter.json").read_text())
    assert report["path"] == str((unpacked / "starter").resolve())  # the kit's, not ours
    assert all("NotImplementedError" in i["message"] for i in report["items"]
               if i["points"] is not None)


def test_make_test_in_the_unpacked_distribution(unpacked):
    """The visible tests pass on the solution (they run on starter/ by default)."""
    result = subprocess.run(["make", "test", f"PY={sys.executable}"], cwd=unpacked,
                            env={**os.environ, "NNKIT_IMPL": str(NAMED["solution"])},
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    assert f"{len(VISIBLE)} passed" in result.stdout
    with pytest.raises(NotImplementedError):
        check("add_bias", load_function(unpacked / "starter", "net_1_kernels", "add_bias"))


def test_student_check_says_why_speed_is_not_graded(monkeypatch):
    # Restored after the test: without_solution() patches the grader in this process.
    monkeypatch.setattr(part1, "performance_item", part1.performance_item)
    monkeypatch.setattr(part1, "measure_reference", part1.measure_reference)
    without_solution()
    assert part1.measure_reference(None, None) is None
    item = part1.performance_item("naive", True, None, [], _Config(), None)
    assert isinstance(item, ItemResult) and item.status == NOT_GRADED
    assert item.message == NO_SOLUTION


class _Config:
    def title(self, item_id):
        return item_id

    def points(self, item_id):
        return 5.0
