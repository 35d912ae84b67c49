"""The student distribution: what it holds, that nothing secret leaks into it, and that
`make check` and `make test` work from the unpacked archive."""

import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile
from functools import partial

import pytest

from grader.course import dist
from grader.course.hidden import HIDDEN
from grader.course.stubgen import stub_source
from grader.parts import gemm as part1
from grader.results import NOT_GRADED
from grader.selection import EVERYTHING, NO_SOLUTION, Selection
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
    assert "nnkit/model_parallel.py" in {p.relative_to(kit).as_posix() for p in marked}
    for path in marked:
        where = path.relative_to(kit).as_posix()
        standin = dist.STANDINS.get(where)
        body = None if standin is None else partial(dist.call_standin, standin)
        shipped = root / path.relative_to(kit)
        assert shipped.read_text() == stub_source(path.read_text(), body=body)
    # The Part 3 twins call the plain stand-ins, which hold none of the solution's lines.
    twins = (root / "nnkit" / "collectives.py").read_text()
    for function in ("scatter_batch", "allreduce_gradients", "ring_allreduce"):
        assert f"return plain_collectives.{function}(**arguments)" in twins
    plain = (root / "nnkit" / "plain_collectives.py").read_text()
    assert ".Scatterv(" not in plain and ".Sendrecv(" not in plain  # calls, not the docstring
    # The bonus ships as a stub.
    bonus = (root / "nnkit" / "model_parallel.py").read_text()
    assert 'raise NotImplementedError("write model_parallel_step()")' in bonus
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
    assert f"{len(VISIBLE) + 3} passed" in result.stdout  # and Part 3 on 1, 2, 3 ranks
    # On the stubs, Part 3's visible checks fail and say what to write.
    stubs = subprocess.run([sys.executable, "-m", "pytest", "-q", "tests", "-k", "mpi"],
                           cwd=unpacked, capture_output=True, text=True, timeout=600,
                           env={k: v for k, v in os.environ.items() if k != "NNKIT_IMPL"})
    assert stubs.returncode != 0 and "3 failed" in stubs.stdout
    assert "NotImplementedError: write scatter_batch()" in stubs.stdout
    with pytest.raises(NotImplementedError):
        check("add_bias", load_function(unpacked / "starter", "net_1_kernels", "add_bias"))


def test_student_check_says_why_speed_is_not_graded():
    """Without solution/ (the student kit), a speed item left ungraded on a GPU for want
    of the solution's timing says where to time one's own; without a GPU it says so."""
    on_gpu = part1.performance_item("naive", True, None, [], _Config(), None, on_gpu=True)
    no_gpu = part1.performance_item("naive", True, None, [], _Config(), None)
    kit = Selection(solution=False)
    assert [i.message for i in kit.keep([on_gpu], on_gpu=True) + kit.keep([no_gpu], on_gpu=False)
            ] == [NO_SOLUTION, no_gpu.message]
    assert on_gpu.status == NOT_GRADED and "no GPU" in no_gpu.message
    assert EVERYTHING.keep([on_gpu], on_gpu=True) == [on_gpu]  # the instructors' kit: untouched


class _Config:
    def title(self, item_id):
        return item_id

    def points(self, item_id):
        return 5.0


# ---------------------------------------------------------------------------------------
# The student's path: every command the student README shows, run in the unpacked kit

# Commands of the student README that this test runs, with what their output must show.
# NNKIT_IMPL / IMPL=solution stands for a student who has done everything (the kit's
# solution folder, outside the unpacked kit).
README_RUN = {
    "make test": "passed",
    "make check PART=gemm KERNEL=naive": "gemm.naive.correctness",
    "make check FUNCTION=scatter_batch": "mpi.scatter",
    "make train-mpi NP=2 IMPL=reference": "test accuracy",
    "make train IMPL=reference": "test accuracy",
    "make bench-mpi": "one reduce of",
    "make handouts": "pages to",
}
# Commands it leaves out, and why.
README_SKIP = {
    "make check": "the whole grader on starter/: test_make_check_in_the_unpacked_distribution",
    "make data": "downloads MNIST",
    "make bench": "Part 4, optional: minutes even with --quick",
    "make tune": "Part 4, optional: minutes even with --quick",
    "make bench-gemm": "GPU only",
    "make train": "full MNIST (the sample run is make train IMPL=reference)",
    "make check PART=net": "the same mechanism as PART=gemm, minutes in the simulator",
    "make check PART=mpi": "the same mechanism as FUNCTION=scatter_batch",
    "make check FUNCTION=softmax_cross_entropy": "the same mechanism as FUNCTION=scatter_batch",
    "make train-mpi NP=2 IMPL=reference ARGS=--model-parallel": "the bonus ships as a stub",
}
SMALL = "--data sample --limit 200 --pool 4 --hidden 16 --batch 50"


def _readme_commands(text: str) -> set[str]:
    """`make ...` commands the README shows (in code spans and blocks), without ARGS."""
    import re

    found = set()
    for command in re.findall(r"(?:^|`)(make [^`#\n]*)", text, flags=re.M):
        command = re.sub(r'ARGS=("[^"]*("|$)|\S*)', "", command)  # quoted, or cut by a line end
        words = command.split()
        if len(words) >= 2 and words[1][0].islower():
            found.add(" ".join(w for w in words if "=" not in w or w.split("=")[0] in
                               ("PART", "KERNEL", "FUNCTION", "IMPL", "NP")))
    return found


def test_every_readme_command_is_run_or_explained(unpacked):
    shown = _readme_commands((unpacked / "README.md").read_text())
    assert "make train-mpi NP=2 IMPL=reference" in shown  # Part 3 is in the README
    unexplained = shown - README_RUN.keys() - README_SKIP.keys()
    assert not unexplained, f"README commands neither run nor explained: {unexplained}"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_the_student_readme_commands_work_in_the_unpacked_kit(unpacked):
    """The README's commands, from the unpacked archive, with this interpreter (PY=), in
    the simulator; each prints what it should, and quick checks write folders of their
    own, never the full run's."""
    from nnkit.collectives import find_mpiexec

    if find_mpiexec() is None:
        pytest.skip("no mpiexec")
    solution = str(NAMED["solution"])
    env = {**os.environ, "NNKIT_DEVICE": "sim", "NNKIT_IMPL": solution}
    extra = {
        "make test": [],
        "make check PART=gemm KERNEL=naive": ["JOBS=2"],
        "make check FUNCTION=scatter_batch": ["JOBS=2"],
        "make train-mpi NP=2 IMPL=reference": [f"ARGS=--data sample --epochs 2 {SMALL}"],
        "make train IMPL=reference": [f"ARGS=--data sample --epochs 2 {SMALL}"],
        "make bench-mpi": [f"IMPL={solution}", f"ARGS={SMALL} --epochs 1 --gemm host "
                           "--ranks 1,2 --repeats 2 --hidden 16"],
        "make handouts": [],
    }
    full = unpacked / "build" / "check" / "starter.json"  # the full run's report, if any
    before = full.read_bytes() if full.exists() else None
    for command, expect in README_RUN.items():
        argv = [*command.split(), f"PY={sys.executable}", *extra[command]]
        done = subprocess.run(argv, cwd=unpacked, env=env, capture_output=True, text=True,
                              timeout=900)
        shown = done.stdout + done.stderr
        assert done.returncode == 0, f"{command}: {shown[-3000:]}"
        assert expect in shown, f"{command}: {shown[-3000:]}"
    naive = json.loads((unpacked / "build/check/gemm-naive/starter.json").read_text())
    assert {i["id"] for i in naive["items"]} == {"gemm.naive.correctness",
                                                  "gemm.naive.performance"}
    scatter = json.loads((unpacked / "build/check/scatter_batch/starter.json").read_text())
    assert [i["id"] for i in scatter["items"]] == ["mpi.scatter"]
    assert scatter["items"][0]["points"] == 0  # starter/ is a stub
    assert (full.read_bytes() if full.exists() else None) == before  # left alone


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_handouts_in_the_unpacked_kit(unpacked):
    """The student kit renders its own handouts: the renderer, its template and the
    figures ship, and every link between the shipped handouts holds."""
    done = subprocess.run(["make", "handouts", f"PY={sys.executable}"], cwd=unpacked,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = unpacked / "build" / "handouts"
    assert {p.stem for p in out.glob("*.html")} == \
        {p.stem for p in (unpacked / "handouts").glob("*.md")}
    assert "img/ring-allreduce.png" in (out / "part3-mpi.html").read_text(encoding="utf-8")
    assert (out / "img" / "ring-allreduce.png").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_train_mpi_refuses_zero_ranks(unpacked):
    done = subprocess.run(["make", "train-mpi", "NP=0", f"PY={sys.executable}"], cwd=unpacked,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "NP must be a number of ranks" in done.stderr


def test_the_report_templates_ship_and_render(unpacked, tmp_path):
    """The HTML reports are Jinja2 templates, not modules: the kit must carry them too."""
    kit_templates = sorted(p.name for p in (KIT_ROOT / "grader/reports/templates").iterdir())
    shipped = unpacked / "grader/reports/templates"
    assert kit_templates and sorted(p.name for p in shipped.iterdir()) == kit_templates
    script = ("import sys; from grader.reports.feedback import write_feedback; "
              "write_feedback({'name': 'ada', 'items': []}, sys.argv[1])")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=unpacked,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "<h1>Feedback: ada</h1>" in (tmp_path / "ada.html").read_text(encoding="utf-8")
