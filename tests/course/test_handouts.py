"""The handouts against the kit: the points table is the config's, the functions they name
are starter/'s, every make target they use exists, and no development status or private
reference reaches a student."""

import ast
import re

import pytest

from grader.course import points_table
from grader.course.stubgen import check_line
from grader.scoring import load_config
from nnkit.submission import NAMED
from tests.conftest import KIT_ROOT

HANDOUTS = KIT_ROOT / "handouts"
STUDENT_FILES = KIT_ROOT / "grader" / "student_files"
STUDENT_TEXTS = [*sorted(HANDOUTS.glob("*.md")), STUDENT_FILES / "README.md"]


def _starter_functions() -> dict[str, bool]:
    """Every top-level function of starter/ -> whether it is a stub to write."""
    found = {}
    for path in NAMED["starter"].glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                found[node.name] = "NotImplementedError" in ast.unparse(node)
    return found


def test_points_handout_is_the_config():
    text = points_table.render(load_config())
    assert (HANDOUTS / "points.md").read_text() == text, \
        "handouts/points.md is stale: run python -m grader.course.points_table"
    for item in load_config().items:
        assert f"`{item}`" in text


def test_points_handout_names_the_functions_of_starter():
    starter = _starter_functions()
    named = {f for fs in points_table.item_functions().values() for f in fs
             if f.isidentifier()}
    assert named and named <= set(starter), named - set(starter)
    # Every stub a student writes is checked by some item (kernels through their launcher).
    stubs = {name.removesuffix("_kernel") for name, stub in starter.items() if stub}
    assert stubs <= named, stubs - named


def test_handouts_name_existing_starter_modules():
    modules = {p.name for p in NAMED["starter"].glob("*.py")}
    for path in STUDENT_TEXTS:
        for name in re.findall(r"`((?:gemm|net|mpi)_\d_\w+\.py)`", path.read_text()):
            assert name in modules, f"{path.name} names {name}, which starter/ lacks"


def test_every_make_target_shown_to_students_exists():
    makefile = (STUDENT_FILES / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, flags=re.M))
    targets.add("grade")  # named as the instructors' command that `make check` mirrors
    for path in STUDENT_TEXTS:
        for target in re.findall(r"(?:^\s*|`)make ([a-z][\w-]*)", path.read_text(), re.M):
            assert target in targets, f"{path.name}: make {target} is not a target"


@pytest.mark.parametrize("phrase", ["KIT-NOTES", "third reading", "not built yet",
                                    "goal is not met", "so far", "TODO"])
def test_no_development_status_in_student_texts(phrase):
    for path in STUDENT_TEXTS:
        assert phrase.lower() not in path.read_text().lower(), f"{path.name}: {phrase!r}"


def test_every_stub_docstring_ends_with_its_check_command():
    for path in NAMED["starter"].glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and "NotImplementedError" in ast.unparse(node):
                doc = ast.get_docstring(node) or ""
                last = doc.strip().splitlines()[-1] if doc.strip() else ""
                assert re.fullmatch(r"Check: `make check [A-Z]+=\w+( KERNEL=\w+)?` "
                                    r"\((a few lines|about \d+ lines)\)\.", last), \
                    f"{path.name}:{node.name}: {last!r}"


def test_check_line_names_the_quick_check():
    assert check_line("gemm_shared_kernel", 23) == \
        "Check: `make check PART=gemm KERNEL=shared` (about 25 lines)."
    assert check_line("scatter_batch", 3) == "Check: `make check FUNCTION=scatter_batch` " \
                                             "(a few lines)."


def test_softmax_docstring_gives_the_stable_loss():
    text = (NAMED["starter"] / "net_1_kernels.py").read_text()
    assert "log(sum_j exp(Z[i, j] - m))" in text and "m = max_j Z[i, j]" in text


def test_check_line_goes_into_the_docstring_after_a_long_signature():
    from grader.course.stubgen import stub_source

    source = ('def scatter_batch(comm, X,\n                  labels) -> tuple:\n'
              '    """Share out."""\n    ### BEGIN SOLUTION\n    return X, labels\n'
              '    ### END SOLUTION\n')
    stub = stub_source(source)
    assert stub.startswith('def scatter_batch(comm, X,\n                  labels) -> tuple:\n'
                           '    """Share out.\n\n    Check: `make check FUNCTION=scatter_batch`')
    assert check_line("mse_backward_pass", 20) is None  # no item: nothing added


def test_a_quick_check_keeps_only_its_item_and_checks(monkeypatch):
    """make check FUNCTION=add_bias: only the task of its item runs, and of that item's
    checks (it covers three functions) only add_bias's are shown; no reference network
    is trained for it."""
    from grader import pipeline
    from grader.results import FAIL, ItemResult
    from grader.selection import Selection

    def items():
        checks = [{"case": "add_bias 1x1"}, {"case": "bias_sigmoid 1x1"}]
        return [ItemResult("net.kernels", "k", 10, 0.0, FAIL, "m", checks=checks),
                ItemResult("net.softmax", "s", 10, 0.0, FAIL, "m")]

    fake = [pipeline.Task("net functions", ["net.kernels", "net.softmax"], items),
            pipeline.Task("mpi scatter", ["mpi.scatter"], lambda: [])]
    monkeypatch.setattr(pipeline, "every_task", lambda *args, **kwargs: fake)
    quick = Selection("add_bias")
    assert (quick.part, quick.item) == ("net", "net.kernels")
    assert pipeline.references(["net"], None, None, None, quick)["net"] is None
    tasks = pipeline.tasks(["net"], [], None, None, None, False, {}, None, quick)
    assert [t.name for t in tasks] == ["net functions"] and tasks[0].item_ids == ["net.kernels"]
    kept = tasks[0].run()
    assert [i.id for i in kept] == ["net.kernels"]
    assert [c["case"] for c in kept[0].checks] == ["add_bias 1x1"]
    with pytest.raises(ValueError, match="unknown function"):
        Selection("not_a_function")


def _signature(node: ast.FunctionDef) -> str:
    """`a, b, scale=1.0`: a function's parameters as the handouts' tables write them."""
    args = node.args.args
    defaults = [None] * (len(args) - len(node.args.defaults)) + node.args.defaults
    return ", ".join(a.arg + ("" if d is None else f"={ast.unparse(d)}")
                     for a, d in zip(args, defaults, strict=True))


def test_handout_contract_tables_match_starter_signatures():
    defs = {}
    for path in NAMED["starter"].glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                defs[node.name] = _signature(node)
    rows = 0
    for path in sorted(HANDOUTS.glob("part*.md")):
        for name, params in re.findall(r"^\| `(\w+)\(([^)]*)\)` \|", path.read_text(), re.M):
            rows += 1
            assert name in defs, f"{path.name}: {name}() is not a function of starter/"
            assert params.replace(" ", "") == defs[name].replace(" ", ""), \
                f"{path.name}: {name}({params}) but starter/ has {name}({defs[name]})"
    assert rows >= 12  # the Part 2 and Part 3 contract tables were read


def test_student_texts_call_the_environments_interpreter():
    """A bare `python -m nnkit` runs another installation (ModuleNotFoundError: numpy):
    the texts say `.venv/bin/python -m ...` or give a make target."""
    for path in STUDENT_TEXTS:
        bare = re.findall(r"(?:^|[\s`(])python3? -m (?:nnkit|grader|pytest)", path.read_text())
        assert not bare, f"{path.name}: {bare[:3]}"
