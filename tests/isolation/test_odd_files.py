"""Whatever files a submission holds, the class is graded: odd entries are left out with a
note, odd names are shown clean, modules named like the kit's or the standard library's
stand in for nothing, sources and notebooks that break a reader cost their own items
only, and the entries of a class's folder that are not plain folders are each reported.
The hostile files are made here (the fast tests look at each reader; one slow test grades
a class of them end to end)."""

from __future__ import annotations

import csv
import json
import os
import py_compile
import shutil
import socket
import stat
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from grader import nbextract
from grader.checks import anticheat, policy
from grader.submissions import copy_submission, resolve, survey
from tests.conftest import KIT_ROOT, run_kit

SOLUTION = KIT_ROOT / "solution" / "gemm_1_naive.py"
ESCAPES = "\x1b]0;pwned\x07\x1b[31m"
FORGED = f"{ESCAPES}gemm.naive.correctness 10/10 FORGED by the notebook"
# Names a submission's module could take to stand in for what the kit or a library
# imports: the kit, its libraries and optional ones, start-up hooks, the standard library.
SHADOWED = ["numpy", "numba", "llvmlite", "nnkit", "grader", "cupy", "cupyx", "scipy", "torch",
            "mpi4py", "cffi", "sitecustomize", "usercustomize", "__init__", "__main__", "json",
            "zipfile", "pickle", "ctypes", "threading", "tempfile", "shutil", "io", "os",
            "typing", "dataclasses", "contextlib", "pathlib", "hashlib", "inspect", "gc",
            "signal", "faulthandler", "atexit", "random", "struct", "zlib", "gzip", "lzma",
            "bz2", "csv", "string", "textwrap", "warnings", "logging", "traceback",
            "linecache", "tokenize", "ast", "copy", "weakref", "queue", "decimal", "uuid",
            "platform", "locale"]
# Deeper than the parser (unary minus) and the checkers' visitors (calls, attributes) go.
DEEP_SOURCE = ("x = " + "-" * 200_000 + "1\n" + "y = " + "f(" * 190 + ")" * 190 + "\n"
               + "z = a" + ".b" * 100_000 + "\n")


def _honest(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOLUTION, folder)
    return folder


def _create(folder: Path, raw_name: bytes, data: bytes = b"x = 1\n") -> None:
    """A file whose name is any bytes (a newline, escapes, bytes that are not UTF-8)."""
    fd = os.open(os.fsencode(folder) + b"/" + raw_name, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, data)
    os.close(fd)


def _shadows(folder: Path) -> Path:
    """The solution beside modules that end the worker if anything imports them, a
    start-up hook, a package named numpy and a stale compiled module where Python would
    look for one."""
    _honest(folder)
    for name in SHADOWED:
        (folder / f"{name}.py").write_text(f"raise SystemExit('{name}.py of the submission "
                                           "was imported')\n")
    (folder / "evil.pth").write_text("import os; os._exit(3)\n")
    (folder / "numpy").mkdir()
    (folder / "numpy" / "__init__.py").write_text("raise SystemExit('numpy/ imported')\n")
    stale = folder.parent / f"{folder.name}-stale.py"
    stale.write_text("def gemm_naive(A, B, C, alpha, beta):\n    raise SystemExit('stale')\n")
    cache = folder / "__pycache__"
    cache.mkdir()
    py_compile.compile(str(stale), cfile=str(cache / f"gemm_1_naive.{sys.implementation.cache_tag}"
                                                      ".pyc"))
    stale.unlink()
    return folder


ODD_NAMES = [b"new\nline.py", b"tab\there.py", b"esc\x1b]0;pwned\x07.py", b"caf\xe9.py",
             b"x" * 250 + b".py", b"-rf.py", b"--parts.py", b" .py", b"\xff\xfe.py",
             b"bell\x07.txt"]


def _odd_entries(folder: Path) -> Path:
    """The solution beside every kind of entry a job must not get, or not be stopped by."""
    _honest(folder)
    for raw in ODD_NAMES:
        _create(folder, raw)
    (folder / "to_shadow.py").symlink_to("/etc/shadow")
    (folder / "to_other_module.py").symlink_to(SOLUTION)
    (folder / "to_folder").symlink_to(KIT_ROOT / "solution")
    (folder / "loop_a.py").symlink_to(folder / "loop_b.py")
    (folder / "loop_b.py").symlink_to(folder / "loop_a.py")
    (folder / "dangling.py").symlink_to(folder / "nothing_here")
    os.mkfifo(folder / "fifo.py")  # opened for reading, it would block
    with socket.socket(socket.AF_UNIX) as server:  # its file stays after close
        server.bind(str(folder / "sock.py"))
    try:  # a character device (root only): /dev/zero would read forever
        os.mknod(folder / "zero.py", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    except OSError:
        pass
    with open(folder / "sparse.py", "wb") as f:
        f.truncate(2 << 30)  # 2 GiB that occupy no disk
    (folder / "closed.py").write_text("x = 1\n")
    (folder / "closed.py").chmod(0)
    (folder / "closed_dir").mkdir(mode=0)
    return folder


def _tree(folder: Path) -> dict[str, tuple]:
    """Every entry under folder (links not followed): kind, size, mode, mtime."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            found[path] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mode,
                           info.st_mtime_ns)
    return found


# ---------------------------------------------------------------------------------------
# Each reader on its own


def test_odd_entries_are_left_out_unread_and_named_clean(tmp_path):
    folder = _odd_entries(tmp_path / "odd")
    start = time.perf_counter()
    copy = copy_submission(folder, tmp_path / "copy")
    assert time.perf_counter() - start < 5  # no FIFO, device or sparse file was read
    copied = {p.name for p in copy.iterdir()}
    assert "gemm_1_naive.py" in copied
    assert all((copy / n).is_file() and not (copy / n).is_symlink() for n in copied)
    assert not {"to_shadow.py", "to_other_module.py", "loop_a.py", "dangling.py", "fifo.py",
                "sock.py", "zero.py", "sparse.py", "to_folder", "closed_dir"} & copied
    assert (copy / "gemm_1_naive.py").read_bytes() == SOLUTION.read_bytes()
    note = survey(folder).note()
    for said in ("symbolic link(s)", "FIFO(s) (fifo.py)", "socket(s) (sock.py)",
                 ".py file(s) over 1 MiB (sparse.py)", "folder(s) (closed_dir)"):
        assert said in note, note
    for bad in ("\x1b", "\x07", "\n", "\udce9"):  # names shown, never as raw bytes
        assert bad not in note


def test_a_module_the_grader_may_not_read_is_named_in_the_note(tmp_path, monkeypatch):
    """Mode 000 stops a grader that is not root: the module is then missing, and the
    note says why. (Root reads it anyway; os.access answers for the grader's user.)"""
    folder = _honest(tmp_path / "closed")
    (folder / "gemm_1_naive.py").chmod(0)
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if str(path).endswith(
        "gemm_1_naive.py") else real(path, mode, **kw))
    manifest = survey(folder)
    assert manifest.files == []
    assert "1 .py file(s) the grader may not read (permissions) (gemm_1_naive.py)" in \
        manifest.note()


def test_a_module_nested_too_deeply_is_refused_by_the_policy_and_stops_no_scan(tmp_path):
    folder = tmp_path / "deep"
    folder.mkdir()
    (folder / "gemm_1_naive.py").write_text(DEEP_SOURCE)
    assert anticheat.scan(folder, "gemm_1_naive") == []  # raised MemoryError before
    found = policy.check(folder, "gemm_1_naive", "gemm")
    assert found and "nested too deeply" in found[0].describe() and policy.is_cheat(found[0])


def _notebook(path: Path, cells: list | None = None, raw: bytes | None = None) -> Path:
    document = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_bytes(raw if raw is not None else json.dumps(document).encode())
    return path


def _tagged(source: object, **extra: object) -> dict:
    return {"cell_type": "code", "metadata": {"nnkit": {"module": "gemm_1_naive"}},
            "source": source, **extra}


@pytest.mark.parametrize("label, raw, cells", [
    ("invalid JSON", b"{not json", None),
    ("nested arrays", b"[" * 200_000 + b"]" * 200_000, None),  # RecursionError in json
    ("nested cells", b'{"cells": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None),
    ("source of numbers", None, [_tagged([1, 2, 3])]),
    ("source a mapping", None, [_tagged({"a": 1})]),
])
def test_a_notebook_that_breaks_the_reader_is_a_notebook_error(tmp_path, label, raw, cells):
    """NotebookError is what `make autograde` (grader/course/nbcourse.py) turns into one
    student's zero; anything else stopped the extraction of the whole class."""
    path = _notebook(tmp_path / "nb.ipynb", cells, raw)
    with pytest.raises(nbextract.NotebookError):
        nbextract.extract_notebooks([path], tmp_path / "out")


def test_a_huge_or_special_notebook_is_refused_unread(tmp_path):
    huge = tmp_path / "huge.ipynb"
    with open(huge, "wb") as f:
        f.truncate(2 << 30)  # sparse: 2 GiB that json would have to hold in memory
    os.mkfifo(tmp_path / "fifo.ipynb")  # opened for reading, it would block
    (tmp_path / "link.ipynb").symlink_to(huge)
    start = time.perf_counter()
    for name, said in (("huge", "more than the"), ("fifo", "not a regular file"),
                       ("link", "symbolic link")):
        with pytest.raises(nbextract.NotebookError, match=said):
            nbextract.notebook_cells(tmp_path / f"{name}.ipynb")
    assert time.perf_counter() - start < 2


def test_a_lone_surrogate_in_a_cell_is_written_as_a_replacement(tmp_path):
    """JSON may spell half a UTF-16 pair (\\udce9), which no UTF-8 file can hold."""
    text = json.dumps({"cells": [_tagged("# caf\udce9\n" + SOLUTION.read_text())]})
    path = _notebook(tmp_path / "nb.ipynb", raw=text.encode())
    nbextract.extract_notebooks([path], tmp_path / "out")
    module = (tmp_path / "out" / "gemm_1_naive.py").read_text()
    assert module.startswith("# caf?\n") and "def gemm_naive" in module


def test_the_entries_of_a_class_folder_are_each_graded_or_reported(tmp_path, capsys):
    klass = tmp_path / "class"
    for name in ("alice", "bob", "--parts", "with space"):
        _honest(klass / name)
    (klass / "carol").symlink_to(_honest(tmp_path / "elsewhere" / "carol"))
    (klass / "bob_again").symlink_to(klass / "bob")  # the same folder under two names
    (klass / "dangling").symlink_to(klass / "nobody")
    (klass / "loop").symlink_to(klass / "loop")
    zipfile.ZipFile(klass / "dave.zip", "w").writestr("gemm_1_naive.py", SOLUTION.read_text())
    with tarfile.open(klass / "erin.tar.gz", "w:gz") as archive:
        archive.add(SOLUTION, "gemm_1_naive.py")
    _notebook(klass / "frank.ipynb", [_tagged(SOLUTION.read_text())])
    os.mkfifo(klass / "gina")
    (klass / "README.md").write_text("the class\n")
    (klass / "mallory").symlink_to(KIT_ROOT / "solution")  # an unpacked archive's link
    found = {s.name: s for s in resolve([klass], tmp_path / "nb")}
    graded = {"alice", "bob", "--parts", "with space", "frank"}
    linked = "a symbolic link, not followed"
    zero = {"carol": linked, "bob_again": linked, "mallory": linked,
            "dangling": "a symbolic link to nothing", "loop": "a symbolic link to nothing",
            "dave.zip": "an archive", "erin.tar.gz": "an archive", "gina": "neither a folder"}
    assert set(found) == graded | set(zero)  # the README alone is left out
    for name in graded:
        assert found[name].folder is not None and found[name].problem is None, name
    assert (found["frank"].folder / "gemm_1_naive.py").read_text() == SOLUTION.read_text()
    for name, said in zero.items():
        assert found[name].folder is None and said in found[name].problem, name
    assert "README.md: not a submission" in capsys.readouterr().err
    # Named on the command line, a link is not followed either
    (tmp_path / "linked").symlink_to(KIT_ROOT / "solution")
    [sub] = resolve([tmp_path / "linked"], tmp_path / "nb")
    assert sub.folder is None and linked in sub.problem


# ---------------------------------------------------------------------------------------
# A class of them, graded


@pytest.fixture(scope="module")
def graded_odd(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("odd")
    klass = root / "class"
    _shadows(klass / "shadows")
    _odd_entries(klass / "odd_entries")
    _honest(klass / "--parts")
    (klass / "latin1").mkdir()
    (klass / "latin1" / "gemm_1_naive.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + SOLUTION.read_bytes())
    (klass / "not_utf8").mkdir()
    (klass / "not_utf8" / "gemm_1_naive.py").write_bytes(
        b"def gemm_naive(A, B, C, alpha, beta):\n    return 'caf\xe9 \xff'\n")
    (klass / "deep").mkdir()
    (klass / "deep" / "gemm_1_naive.py").write_text(DEEP_SOURCE)
    (klass / "compiled_only").mkdir()
    py_compile.compile(str(SOLUTION), cfile=str(klass / "compiled_only" / "gemm_1_naive.pyc"))
    (klass / "empty").mkdir()
    (klass / "folders_only" / "a" / "b").mkdir(parents=True)
    zipfile.ZipFile(klass / "zipped.zip", "w").writestr("gemm_1_naive.py", SOLUTION.read_text())
    (klass / "mallory").symlink_to(KIT_ROOT / "solution")  # an unpacked archive's link
    _notebook(klass / "fake_output.ipynb", [
        _tagged(SOLUTION.read_text(), execution_count=1,
                outputs=[{"output_type": "stream", "name": "stdout", "text": FORGED}]),
        {"cell_type": "code", "metadata": {}, "source": "print('scratch')",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": FORGED}]}])
    _notebook(klass / "nested.ipynb", raw=b"[" * 200_000 + b"]" * 200_000)
    before = _tree(klass)
    out = root / "grades"
    result = run_kit("grader", str(klass), "--parts", "gemm", "--kernels", "naive",
                     "--jobs", "2", "--seed", "5", "--out", str(out))
    reports = {r["name"]: r for r in (json.loads(p.read_text()) for p in out.glob("*.json"))}
    return {"result": result, "reports": reports, "out": out, "before": before,
            "after": _tree(klass)}


def _item(report: dict, item: str = "gemm.naive.correctness") -> dict:
    return next(i for i in report["items"] if i["id"] == item)


@pytest.mark.slow
def test_a_class_of_odd_files_is_graded_whole(graded_odd):
    result, reports = graded_odd["result"], graded_odd["reports"]
    assert result.returncode == 1, result.stderr[-3000:]  # the archive is graded zero
    rows = list(csv.DictReader(open(graded_odd["out"] / "grades.csv", encoding="utf-8")))
    names = {"shadows", "odd_entries", "--parts", "latin1", "not_utf8", "deep",
             "compiled_only", "empty", "folders_only", "zipped.zip", "fake_output", "nested",
             "mallory"}
    assert {r["name"] for r in reports.values()} == names
    assert len(rows) == len(names)
    # The solution's module, whatever lies beside it, keeps every point: no shadow module
    # was imported in its place, nor the stale .pyc, the .pth or the numpy/ package.
    for name in ("shadows", "odd_entries", "--parts", "latin1", "fake_output"):
        item = _item(reports[name])
        assert item["points"] == item["max_points"] > 0, (name, item["message"])
    zero = {"not_utf8": "SyntaxError", "deep": "nested too deeply",
            "compiled_only": "missing", "empty": "missing", "folders_only": "missing",
            "zipped.zip": "an archive", "nested": "missing", "mallory": "not followed"}
    for name, said in zero.items():
        item = _item(reports[name])
        assert item["points"] == 0 and said in item["message"], (name, item["message"])
    assert "RecursionError" in " ".join(reports["nested"]["notes"])
    # A source the grader's own readers cannot parse is the policy's verdict, not a
    # failure of the grader (which also marked the speed item failed in the simulator)
    assert "could not grade" not in json.dumps(reports["deep"])
    assert _item(reports["deep"], "gemm.naive.performance")["status"] != "fail"


@pytest.mark.slow
def test_nothing_of_the_odd_files_reaches_the_reports_or_changes(graded_odd):
    texts = [graded_odd["result"].stdout, graded_odd["result"].stderr]
    texts += [p.read_text(errors="replace") for p in graded_odd["out"].rglob("*")
              if p.is_file() and p.suffix in (".json", ".md", ".html", ".csv")]
    for text in texts:
        assert "FORGED" not in text  # a notebook's outputs are never read
        for bad in ("\x1b", "\x07"):
            assert bad not in text
    # Grading wrote nothing into the submissions (jobs work on private copies)
    assert graded_odd["after"] == graded_odd["before"]


def test_a_students_folder_shaped_like_a_class_takes_no_classmates_name(tmp_path):
    """Red team: abby's folder holds only sub-folders, one named after alice. Named on the
    command line beside alice's, the real alice keeps her name; regraded alone into the
    class's book, abby's 'alice' gets a row of its own and alice's report is untouched."""
    from grader.reports.report import Gradebook
    from grader.results import ItemResult, SubmissionResult

    abby, alice = tmp_path / "class" / "abby", tmp_path / "class" / "alice"
    for folder in (abby / "abby", abby / "alice", alice):
        _honest(folder)
    found = resolve([abby, alice], tmp_path / "nb")
    by_name = {s.name: s.folder for s in found}
    assert by_name["alice"] == alice.resolve() and by_name["alice_"] == (abby / "alice").resolve()

    book = Gradebook(tmp_path / "out")
    item = ItemResult("gemm.naive.correctness", "naive", 10, 10, "pass", "ok")
    real = [s for s in resolve([alice], tmp_path / "nb")][0]
    book.add(SubmissionResult(real.name, str(real.folder), "sim", [item]), real.notes)
    zero = ItemResult("gemm.naive.correctness", "naive", 10, 0, "fail", "no")
    for sub in resolve([abby], tmp_path / "nb"):
        book.add(SubmissionResult(sub.name, str(sub.folder), "sim", [zero]), sub.notes)
    kept = json.loads((tmp_path / "out" / "alice.json").read_text())
    assert kept["path"] == str(alice.resolve()) and kept["total"] == 10
    forged = json.loads((tmp_path / "out" / "alice_.json").read_text())
    assert forged["path"] == str((abby / "alice").resolve())
    assert "another submission's in this book" in forged["notes"][-1]
    rows = list(csv.reader((tmp_path / "out" / "grades.csv").read_text().splitlines()))
    assert sorted(r[1] for r in rows[1:]) == ["abby", "alice", "alice_"]


def test_a_folder_named_like_the_out_option_does_not_redirect_the_reports(tmp_path):
    """`python -m grader *` over folders `--out`, `alice`, `bob`: argparse read
    `--out alice`, and the reports went into alice's folder while she went ungraded (red
    team). An --out that holds a student's modules, or is a submission, is refused before
    anything runs; `--` before the folders (as the Makefile does) grades them all."""
    for name in ("alice", "bob"):
        shutil.copytree(KIT_ROOT / "solution", tmp_path / name)
    result = run_kit("grader", "--out", str(tmp_path / "alice"), str(tmp_path / "bob"),
                     "--parts", "gemm", "--kernels", "naive")
    assert result.returncode == 2 and "into a student's folder" in result.stderr
    assert not (tmp_path / "alice" / "grades.csv").exists()
    result = run_kit("grader", str(tmp_path / "bob"), "--out", str(tmp_path / "bob" / "r"),
                     "--parts", "gemm", "--kernels", "naive")
    assert result.returncode == 2 and "is, or is inside, the submission" in result.stderr


def test_a_notebook_in_a_class_folder_keeps_its_row_when_regraded(tmp_path):
    """A notebook in a class's folder is extracted into a new folder each run; its report
    named that folder as its path, so every regrade into the same book took it for
    another submission's sub-folder and forked a row (carol, carol_, carol__: red team).
    The report names the notebook instead."""
    from grader.reports.report import Gradebook
    from grader.results import ItemResult, SubmissionResult

    klass = tmp_path / "class"
    for name in ("alice", "bob"):
        _honest(klass / name)
    (klass / "carol.ipynb").write_text("{}")
    book = Gradebook(tmp_path / "out")
    item = ItemResult("gemm.naive.correctness", "naive", 10, 10, "pass", "ok")
    for _ in range(3):
        for sub in resolve([klass], tmp_path / "nb"):
            book.add(SubmissionResult(sub.name, str(sub.report_path), "sim", [item]),
                     sub.notes)
    rows = list(csv.reader((tmp_path / "out" / "grades.csv").read_text().splitlines()))
    assert sorted(r[1] for r in rows[1:]) == ["alice", "bob", "carol"]
    assert json.loads((tmp_path / "out" / "carol.json").read_text())["path"] == str(
        (klass / "carol.ipynb").resolve())
