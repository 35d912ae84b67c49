import pytest

from grader.course.stubgen import MarkerError, stale_files, stub_source
from nnkit.submission import NAMED


def test_committed_starter_is_what_make_starter_generates():
    assert stale_files(NAMED["solution"], NAMED["starter"]) == []


def test_starter_holds_no_solution_code():
    for path in NAMED["starter"].glob("*.py"):
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert "NotImplementedError" in text, path.name


def test_stub_keeps_hints_and_indentation():
    source = (
        "def f(x):\n"
        '    """Doc."""\n'
        "    ### BEGIN SOLUTION\n"
        "    # HINT: add one\n"
        "    # a private note\n"
        "    return x + 1\n"
        "    ### END SOLUTION\n"
        "\n"
        "KEEP = 3\n"
    )
    stub = stub_source(source)
    assert "    # HINT: add one\n" in stub
    assert "private note" not in stub and "x + 1" not in stub
    assert '    raise NotImplementedError("write f()")\n' in stub
    assert stub.endswith("KEEP = 3\n")


@pytest.mark.parametrize(
    "source",
    [
        "### BEGIN SOLUTION\nx = 1\n",
        "### END SOLUTION\n",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n",
    ],
)
def test_unbalanced_markers_are_errors(source):
    with pytest.raises(MarkerError):
        stub_source(source)


def test_edited_starter_is_detected(tmp_path):
    starter = tmp_path / "starter"
    starter.mkdir()
    for path in NAMED["starter"].glob("*.py"):
        (starter / path.name).write_text(path.read_text())
    (starter / "gemm_1_naive.py").write_text("# changed by hand\n")
    (starter / "extra.py").write_text("")
    assert stale_files(NAMED["solution"], starter) == ["extra.py", "gemm_1_naive.py"]
