"""Notebooks <-> modules, and the visible checks the notebooks' test cells call."""

import json

import pytest

from grader.cases.net import FUNCTIONS
from grader.course.hidden import HIDDEN
from grader.course.notebook import (
    ASSIGNMENTS,
    build_notebook,
    hoist_hints,
    split_module,
    write_notebook,
)
from grader.course.stubgen import stub_source
from grader.examples import BUG_DIR, load_spec, materialize
from grader.nbextract import NotebookError, extract, join_cells
from nnkit.checks import MODULES, VISIBLE, check
from nnkit.gemm import KERNELS
from nnkit.notebook import setup
from nnkit.submission import NAMED, load_function

PART2 = next(a for a in ASSIGNMENTS if a.name == "part2-network")


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda a: a.name)
def test_extracting_a_source_notebook_gives_back_the_solution(assignment, tmp_path):
    path = write_notebook(build_notebook(assignment), tmp_path / "nb.ipynb")
    assert extract([path], tmp_path / "out") == sorted(assignment.modules)
    for module in assignment.modules:
        solution = (NAMED["solution"] / f"{module}.py").read_text()
        extracted = (tmp_path / "out" / f"{module}.py").read_text()
        assert extracted == hoist_hints(solution)
        # Moving the hints changes nothing that students get.
        assert stub_source(extracted) == stub_source(solution)


def test_split_and_join_are_inverse_and_cut_between_functions():
    source = NAMED["solution"] / "net_2_backprop.py"
    cells = split_module(source.read_text())
    assert join_cells(cells) == source.read_text()
    assert [c.split("(")[0] for c in cells[1:]] == ["def forward", "def backward",
                                                    "def sgd_step"]


def test_hints_move_above_the_region_and_the_code_stays_inside():
    source = ("def f():\n    ### BEGIN SOLUTION\n    # HINT: one\n    return 1\n"
              "    ### END SOLUTION\n")
    assert hoist_hints(source) == ("def f():\n    # HINT: one\n    ### BEGIN SOLUTION\n"
                                   "    return 1\n    ### END SOLUTION\n")


def test_test_cells_hold_the_visible_and_the_hidden_checks():
    notebook = build_notebook(PART2)
    tests = {c["id"]: c["source"] for c in notebook["cells"] if c["id"].startswith("test-")}
    assert set(tests) == {f"test-{f}" for f in FUNCTIONS}
    source = tests["test-backward"]
    visible, hidden = source.split("### BEGIN HIDDEN TESTS")
    assert visible.strip() == 'check("backward", backward)'
    assert repr(HIDDEN["backward"]) in hidden and hidden.strip().endswith("### END HIDDEN TESTS")


def test_extraction_takes_only_tagged_cells_of_known_modules(tmp_path):
    def code(source, module=None, grade_id=None):
        meta = {"nnkit": {"module": module}} if module else {}
        if grade_id:
            meta["nbgrader"] = {"grade_id": grade_id}
        return {"cell_type": "code", "metadata": meta, "source": source, "outputs": []}

    cells = [code("A = 1", "gemm_1_naive"), code("scratch = 2"),
             code("B = 2", "../../evil"), code(["C = ", "3"], None, "gemm_1_naive-4"),
             {"cell_type": "markdown", "metadata": {"nnkit": {"module": "gemm_1_naive"}},
              "source": "text"}]
    path = write_notebook({"cells": cells}, tmp_path / "nb.ipynb")
    assert extract([path], tmp_path / "out") == ["gemm_1_naive"]
    assert (tmp_path / "out" / "gemm_1_naive.py").read_text() == "A = 1\n\n\nC = 3\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gemm_1_naive.py"]
    with pytest.raises(NotebookError):  # one module in two notebooks
        extract([path, path], tmp_path / "again")
    (tmp_path / "broken.ipynb").write_text("{not json")
    with pytest.raises(NotebookError):
        extract([tmp_path / "broken.ipynb"], tmp_path / "broken")


def test_module_cells_run_in_one_namespace_with_relative_imports():
    """What the notebook kernel does: setup, then every cell of Part 2 in one namespace;
    net_2_backprop's `from .net_1_kernels import ...` finds the cells above it."""
    namespace: dict = {}
    setup(namespace, PART2.modules)
    for cell in build_notebook(PART2)["cells"]:
        if "nnkit" in cell["metadata"]:
            exec(compile(cell["source"], cell["id"], "exec"), namespace)  # noqa: S102
    check("forward", namespace["forward"])
    with pytest.raises(ImportError, match="not_there"):
        exec("from .net_1_kernels import not_there", namespace)  # noqa: S102


def test_checks_know_every_graded_function():
    grader_modules = {f: m for m, f in KERNELS.values()}
    grader_modules.update({f: m for f, (m, _) in FUNCTIONS.items()})
    assert MODULES == grader_modules
    assert set(VISIBLE) == set(HIDDEN) == set(MODULES)


def test_visible_checks_pass_the_solution_and_fail_stubs_and_bugs(tmp_path):
    for name in ("gemm_naive", "softmax_cross_entropy", "backward"):
        check(name, load_function(NAMED["solution"], MODULES[name], name))
    with pytest.raises(NotImplementedError):
        check("gemm_naive", load_function(NAMED["starter"], "gemm_1_naive", "gemm_naive"))
    for bug, function in (("naive_beta_ignored", "gemm_naive"),
                          ("softmax_no_max_shift", "softmax_cross_entropy"),
                          ("l2_doubled", "backward")):
        folder = materialize(load_spec(BUG_DIR / f"{bug}.toml"), tmp_path)
        with pytest.raises(AssertionError, match="elements wrong"):
            check(function, load_function(folder, MODULES[function], function))


def test_source_notebook_is_valid_json_with_cell_ids(tmp_path):
    path = write_notebook(build_notebook(ASSIGNMENTS[0]), tmp_path / "nb.ipynb")
    notebook = json.loads(path.read_text())
    ids = [c["id"] for c in notebook["cells"]]
    assert len(ids) == len(set(ids)) and notebook["nbformat"] == 4


@pytest.mark.slow
def test_the_grader_takes_a_notebook_as_a_submission(tmp_path):
    """`python -m grader NB.ipynb` grades the modules of the notebook's tagged cells; a
    notebook that is not JSON is graded zero, and the grading goes on."""
    from tests.conftest import run_kit

    part1 = next(a for a in ASSIGNMENTS if a.name == "part1-gemm")
    good = write_notebook(build_notebook(part1), tmp_path / "alice.ipynb")
    bad = tmp_path / "bob.ipynb"
    bad.write_text("{ not json")
    out = tmp_path / "grades"
    result = run_kit("grader", str(good), str(bad), "--parts", "gemm", "--kernels", "naive",
                     "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no modules extracted from the notebook" in (out / "bob.json").read_text()
    alice = json.loads((out / "alice.json").read_text())["items"][0]
    bob = json.loads((out / "bob.json").read_text())["items"][0]
    assert alice["points"] == alice["max_points"] > 0
    assert bob["points"] == 0 and "missing" in bob["message"]


def test_two_notebooks_of_one_name_are_extracted_apart(tmp_path):
    from grader.submissions import from_notebook

    folders = []
    for student, value in (("a", 1), ("b", 2)):
        (tmp_path / student).mkdir()
        cells = [{"cell_type": "code", "metadata": {"nnkit": {"module": "gemm_1_naive"}},
                  "source": f"A = {value}", "outputs": []}]
        folders.append(from_notebook(
            write_notebook({"cells": cells}, tmp_path / student / "hw.ipynb"),
            tmp_path).folder)
    assert folders[0] != folders[1] and folders[0].name == folders[1].name == "hw"
    assert [(f / "gemm_1_naive.py").read_text() for f in folders] == ["A = 1\n", "A = 2\n"]
