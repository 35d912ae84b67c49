"""The grader survives any submission and never loses a class's grades: capped readers of
what workers write, safe report names, what a job gets of a submission, submissions given
by mistake, reports written as each submission finishes and merged with earlier runs,
SIGTERM, `make clean` and the modes of the data. Hostile files are written here."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from grader import safe_io
from grader.checks.gemm import read_findings
from grader.reports import report
from grader.results import ItemResult, SubmissionResult
from grader.submissions import MAX_FILES, copy_submission, resolve, survey
from nnkit import fetch
from nnkit.mnist import FILES, SAMPLE_DIR
from tests.conftest import KIT_ROOT

FAST = ["--parts", "gemm", "--kernels", "naive"]
MiB = 1 << 20
TITLE = "\x1b]0;pwned\x07"  # OSC: sets the terminal's window title
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: writes the clipboard
COLOUR = "\x1b[31m\x9b2J"  # CSI, and CSI as one C1 byte (clears the screen)


def _npy_header(shape: tuple, dtype: str = "<f4") -> bytes:
    """The magic string and header of an .npy file of this shape, without the data."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False,
                                                  "shape": shape})
    return buffer.getvalue()


def _write_declaring(path: Path, members: dict[str, tuple], data: bytes = b"") -> None:
    """An .npz whose members declare these shapes (float32) but hold only `data`."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, shape in members.items():
            zf.writestr(f"{name}.npy", _npy_header(shape) + data)


# ---------------------------------------------------------------------------------------
# Readers


def test_npz_declaring_4_gib_is_refused_before_allocating(tmp_path):
    bomb = tmp_path / "case-0.npz"
    _write_declaring(bomb, {"A": (1 << 30,)})  # 4 GiB of float32, in a 200-byte file
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(safe_io.UnsafeFile, match="declare 4,294,967,296 bytes"):
        safe_io.load_npz(bomb, max_bytes=64 * MiB, max_members=3)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 1.0 and peak < 4 * MiB


def test_npz_bomb_of_real_compressed_data_is_refused(tmp_path):
    """Three 64 MiB arrays of zeros that deflate to a few hundred KB (np.load would read
    all 192 MiB into memory): refused from the headers alone."""
    bomb = tmp_path / "case-1.npz"
    zeros = bytes(MiB)
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in "ABC":
            with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                member.write(_npy_header((16 * MiB,)))
                for _ in range(64):
                    member.write(zeros)
    assert bomb.stat().st_size < 2 * MiB
    tracemalloc.start()
    with pytest.raises(safe_io.UnsafeFile, match="refused unread"):
        safe_io.load_npz(bomb, max_bytes=100 * MiB, max_members=3, names={"A", "B", "C"})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * MiB


def test_npz_checks_dtypes_names_and_counts(tmp_path):
    good = tmp_path / "good.npz"
    arrays = {"A": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.array([1, 2]),
              "s": np.array(["ab", "c"]), "ok": np.array([True])}
    np.savez(good, **arrays)
    got = safe_io.load_npz(good, max_bytes=MiB, max_members=4)
    assert set(got) == set(arrays) and all(np.array_equal(got[k], v) for k, v in arrays.items())
    cases = {
        "object": ({"A": np.array([{}, None], dtype=object)}, "dtype object"),
        "structured": ({"A": np.zeros(2, dtype=[("x", "<f4")])}, "only plain"),
        "many": ({f"x{i}": np.zeros(1) for i in range(5)}, "more than the 4"),
        "name": ({"evil": np.zeros(1)}, "unexpected array 'evil'"),
    }
    for label, (content, message) in cases.items():
        path = tmp_path / f"{label}.npz"
        np.savez(path, **content)
        with pytest.raises(safe_io.UnsafeFile, match=message):
            safe_io.load_npz(path, max_bytes=MiB, max_members=4,
                             names=None if label != "name" else {"A"})
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(safe_io.UnsafeFile, match="not a readable .npz"):
        safe_io.load_npz(tmp_path / "text.npz", max_bytes=MiB, max_members=4)


def test_readers_open_regular_files_only(tmp_path):
    os.mkfifo(tmp_path / "fifo")  # opening it for reading the usual way would block
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "sock"))
    start = time.perf_counter()
    for name in ("fifo", "link", "sock"):
        for read in (lambda p: safe_io.read_text(p, 100), lambda p: safe_io.read_json(p, 100),
                     lambda p: safe_io.load_npz(p, max_bytes=100, max_members=1)):
            with pytest.raises(safe_io.UnsafeFile):
                read(tmp_path / name)
    server.close()
    assert time.perf_counter() - start < 2
    with pytest.raises(FileNotFoundError):
        safe_io.read_text(tmp_path / "absent", 100)


def test_huge_error_text_is_capped_and_cleaned(tmp_path):
    err = tmp_path / "case-0.err"
    line = f"ValueError: boom {TITLE}{CLIPBOARD}{COLOUR}\r\x00\xff".encode("utf-8", "replace")
    with open(err, "wb") as f:
        f.write(line + b"\xfe\xfe" + b"x" * (16 * MiB))
    text = safe_io.read_text(err, 4000)
    assert len(text) < 4100 and "more characters)" in text
    assert text.startswith("ValueError: boom ")
    for bad in ("\x1b", "\x07", "\x9b", "\x00", "\r", "pwned", "ZXZpbA"):
        assert bad not in text


def test_clean_text_strips_escapes_and_cuts():
    raw = f"a{TITLE}b{CLIPBOARD}c{COLOUR}d\x1bPq#0;1\x1b\\e\u202eF\x85g\tz\nw"
    assert safe_io.clean_text(raw) == "abcde" + "Fg\tz\nw"
    assert safe_io.clean_text("caf\udce9") == "caf\\xe9"  # an undecodable byte, shown
    assert safe_io.clean_text("x" * 50, 10) == "x" * 10 + "... (40 more characters)"


def test_huge_findings_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "case-0.findings.json"
    with open(path, "wb") as f:
        f.truncate(80 * MiB)  # sparse: 80 MiB that would cost the grader 2 GB parsed
    start = time.perf_counter()
    found = read_findings(path)
    assert time.perf_counter() - start < 0.5
    assert len(found) == 1 and found[0]["kind"] == "unreadable findings file"
    many = [{"kind": "read-after-write", "file": f"k{TITLE}.py", "line": i,
             "array": {"nested": "x" * 1000}} for i in range(500)]
    path.write_text(json.dumps(many))
    found = read_findings(path)
    assert len(found) == 51 and "450 more" in found[-1]["kind"]
    assert len(json.dumps(found)) < 30_000 and "\x1b" not in json.dumps(found)


def test_an_error_repeated_in_every_case_is_kept_once():
    class Outcome:
        def __init__(self, label, message):
            self.label, self.message = label, message

    long = "raised ImportError: " + "y" * 3000
    verdict = "all 4 elements within the float32 bound; the race and index checker found: " \
              "k.py:3: negative-index on argument float32[2, 2] A (x2)"
    outcomes = [Outcome(f"case {n}", long) for n in range(8)] + [Outcome("last", "short")]
    outcomes += [Outcome("v1", verdict), Outcome("v2", verdict)]
    safe_io.collapse_repeats(outcomes)
    assert outcomes[0].message == long + " (the same error in 7 more cases)"
    assert all(o.message == "the same error as case 0" for o in outcomes[1:8])
    assert outcomes[8].message == "short"
    assert outcomes[9].message == outcomes[10].message == verdict  # a verdict, kept


# ---------------------------------------------------------------------------------------
# Names


def test_report_names_are_safe_unique_and_stable():
    names = ["alice", "a b", "a_b", "summary", "Summary", "grades", "index", ".hidden",
             "../x", "caf\udce9", "café", "-rf", "a/b", "", "x" * 300, "a_b-0123456789",
             "new\nline", TITLE]
    ids = [report.safe_name(n) for n in names]
    assert len(set(ids)) == len(ids)
    assert ids == [report.safe_name(n) for n in names]  # stable
    assert ids[0] == "alice" and ids[2] == "a_b"  # plain names stay as they are
    for i in ids:
        assert 0 < len(i) <= 80 and not i.startswith(".")
        assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in i)
        assert i.split(".")[0].lower() not in report.RESERVED


def test_write_csv_with_a_name_that_is_not_utf8(tmp_path):
    name = os.fsdecode(b"caf\xe9")  # as os.listdir gives a Latin-1 folder name
    result = SubmissionResult(name, "/x", "sim", [ItemResult("gemm.naive.correctness", "t", 10,
                                                             10.0, "pass", "ok")])
    other = SubmissionResult(f"two\nlines{TITLE}", "/y", "sim", [])
    report.write_csv([result, other], tmp_path / "grades.csv")
    rows = list(csv.DictReader(open(tmp_path / "grades.csv", encoding="utf-8")))
    assert rows[0]["submission"] == "caf\\xe9" and rows[0]["id"] == report.safe_name(name)
    assert rows[0]["total"] == "10"
    assert rows[1]["submission"] == "two\\nlines"  # one line, no escape sequence


# ---------------------------------------------------------------------------------------
# What a job gets of a submission


def _honest(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(KIT_ROOT / "solution" / "gemm_1_naive.py", folder)
    return folder


def _junk(folder: Path, many: int = 0) -> None:
    """What an honest student might leave beside the modules, and worse."""
    os.mkfifo(folder / "stray.fifo")
    (folder / "link.py").symlink_to("/etc/passwd")
    (folder / "data").mkdir()
    with open(folder / "big.bin", "wb") as f:
        f.truncate(1 << 30)  # a 1 GiB sparse file
    with open(folder / "huge.py", "wb") as f:
        f.truncate(2 * MiB)
    for n in range(MAX_FILES + 6):  # more helper modules than jobs get, sorted first
        (folder / f"aa_{n:03d}.py").write_text("")
    if many:  # hard links: a folder of 100,000 entries in a second or two
        bases = [folder / "zz_base0.txt", folder / "zz_base1.txt"]
        for base in bases:
            base.write_text("")
        for n in range(many):
            os.link(bases[n % 2], folder / f"zz{n:06d}.txt")


@pytest.fixture(scope="module")
def klass(tmp_path_factory) -> Path:
    """A folder of submission folders (made once: 100,000 entries take seconds)."""
    root = tmp_path_factory.mktemp("class") / "class"
    root.mkdir()
    for name in ("summary", "a b", "a_b", os.fsdecode(b"caf\xe9")):
        _honest(root / name)
    _junk(_honest(root / "junk"), many=100_000)
    with socket.socket(socket.AF_UNIX) as server:  # its file stays after close
        server.bind(str(root / "junk" / "sock"))
    hostile = root / "hostile"
    hostile.mkdir()
    escapes = (TITLE + COLOUR).encode("unicode_escape").decode()
    (hostile / "gemm_1_naive.py").write_text(HOSTILE.replace("@ESC@", escapes))
    return root


def test_copy_submission_takes_top_level_python_files_only(klass, tmp_path):
    sub = klass / "junk"
    start = time.perf_counter()
    copy = copy_submission(sub, tmp_path / "copy")
    seconds = time.perf_counter() - start
    copied = sorted(p.name for p in copy.iterdir())
    assert "gemm_1_naive.py" in copied and len(copied) == MAX_FILES
    assert all(name.endswith(".py") and (copy / name).is_file() for name in copied)
    assert not {"link.py", "huge.py", "big.bin", "stray.fifo", "data", "sock"} & set(copied)
    assert (copy / "gemm_1_naive.py").read_bytes() == (sub / "gemm_1_naive.py").read_bytes()
    note = survey(sub).note()
    for said in ("1 symbolic link(s) (link.py)", "1 FIFO(s) (stray.fifo)", "1 folder(s) (data)",
                 "1 .py file(s) over 1 MiB (huge.py)", "1 socket(s) (sock)",
                 "100,003 file(s) other than .py (big.bin, ", "7 .py file(s) beyond the first"):
        assert said in note
    assert len(note) < 1000  # counted, not listed
    assert seconds < 10


def test_paths_given_by_mistake(tmp_path):
    klass = tmp_path / "subs"
    for name in ("alice", "bob"):
        _honest(klass / name)
    (klass / "carol").mkdir()  # submitted nothing: graded, as zero
    nested = _honest(tmp_path / "dave" / "hw")  # the modules one level too deep
    found = resolve([klass, nested.parent, tmp_path / "nobody"], tmp_path / "nb")
    assert [s.name for s in found] == ["alice", "bob", "carol", "dave", "nobody"]
    assert all("sub-folders of" in s.notes[0] for s in found[:3])
    assert "hw/ holds some" in found[3].notes[0] and found[3].folder == nested.parent
    assert found[4].folder is None and "no such file or folder" in found[4].problem


# ---------------------------------------------------------------------------------------
# Data


def test_make_data_writes_files_readable_by_all_under_umask_077(tmp_path, monkeypatch):
    pins = {name: fetch.sha256_of(SAMPLE_DIR / name) for name in FILES.values()}
    monkeypatch.setattr(fetch, "SHA256", pins)
    old = os.umask(0o077)
    try:
        fetch.fetch_all(tmp_path / "data" / "mnist", str(SAMPLE_DIR))
    finally:
        os.umask(old)
    for path in [tmp_path / "data", tmp_path / "data" / "mnist"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o755
    for name in FILES.values():
        assert stat.S_IMODE((tmp_path / "data" / "mnist" / name).stat().st_mode) == 0o644


def test_unreadable_data_is_fixed_or_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch, "SHA256", {"f.gz": "0"})
    folder = tmp_path / "mnist"
    folder.mkdir(mode=0o700)
    (folder / "f.gz").write_bytes(b"x")
    os.chmod(folder, 0o700)
    os.chmod(folder / "f.gz", 0o600)
    problems = fetch.open_to_all(folder, fix=False)
    assert len(problems) == 2 and "chmod a+rX" in problems[1]
    assert fetch.open_to_all(folder, fix=True) == []  # the grader owns them: made readable
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "f.gz").stat().st_mode) == 0o644


def test_make_clean_keeps_the_course_and_the_grades(tmp_path):
    shutil.copy(KIT_ROOT / "Makefile", tmp_path)
    for path in ("build/course/gradebook.db", "build/examples/x/a.py", "build/dist/t.tar.gz",
                 "build/check/grades.csv", "grades/grades.csv", "results/r.json"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    subprocess.run(["make", "-s", "clean"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "build/course/gradebook.db").exists()
    assert (tmp_path / "grades/grades.csv").exists() and (tmp_path / "results").exists()
    assert not any((tmp_path / "build" / p).exists() for p in ("examples", "dist", "check"))
    subprocess.run(["make", "-s", "distclean"], cwd=tmp_path, check=True, capture_output=True)
    assert not (tmp_path / "build").exists() and not (tmp_path / "grades").exists()


# ---------------------------------------------------------------------------------------
# A class with hostile and unlucky submissions, graded end to end

HOSTILE = """
def gemm_naive(A, B, C, alpha, beta):
    raise RuntimeError("@ESC@" + "z" * (16 << 20))
"""


def _grader(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grader", *args], cwd=KIT_ROOT,
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _grade_measured(args: list[str], logs: Path, timeout: float = 600) -> dict:
    """The grader's status, output and peak memory (of it and every process it waited
    for: its workers), from wait4."""
    with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "grader", *args], cwd=KIT_ROOT,
                                stdout=out, stderr=err)
        deadline = time.time() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            assert time.time() < deadline, "the grader did not finish"
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return {"status": proc.returncode, "peak_kb": usage.ru_maxrss,
            "stdout": (logs / "stdout").read_text(errors="replace"),
            "stderr": (logs / "stderr").read_text(errors="replace")}


@pytest.fixture(scope="module")
def graded_class(klass):
    root = klass.parent
    os.mkfifo(root / "fifo.ipynb")
    out = root / "grades"
    start = time.perf_counter()
    run = _grade_measured([str(klass), str(root / "missing"), str(root / "fifo.ipynb"), *FAST,
                           "--out", str(out), "--jobs", "2"], root)
    reports = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    return {**run, "root": root, "out": out, "reports": reports,
            "seconds": time.perf_counter() - start}


def _by_name(graded_class) -> dict[str, dict]:
    return {r["name"]: r for r in graded_class["reports"].values()}


def _item(result: dict, item_id: str = "gemm.naive.correctness") -> dict:
    return next(i for i in result["items"] if i["id"] == item_id)


def test_the_class_is_graded_despite_everything(graded_class):
    assert graded_class["status"] == 1, graded_class["stderr"][-3000:]  # the missing path
    rows = list(csv.DictReader(open(graded_class["out"] / "grades.csv", encoding="utf-8")))
    assert sorted(r["submission"] for r in rows) == sorted(
        ["a b", "a_b", "caf\\xe9", "fifo", "hostile", "junk", "missing", "summary"])
    totals = {r["submission"]: r["total"] for r in rows}
    for honest in ("a b", "a_b", "caf\\xe9", "summary", "junk"):
        assert totals[honest] == "10", honest
    assert totals["missing"] == totals["fifo"] == totals["hostile"] == "0"
    assert len({r["id"] for r in rows}) == len(rows)


def test_every_submission_has_its_own_page_and_the_summary_survives(graded_class):
    feedback = graded_class["out"] / "feedback"
    pages = {p.stem for p in feedback.glob("*.html")}
    for result in graded_class["reports"].values():
        assert result["id"] in pages
        page = (feedback / f"{result['id']}.html").read_text(encoding="utf-8")
        assert "Feedback:" in page
    summary = (feedback / "summary.html").read_text(encoding="utf-8")
    assert "Class summary" in summary and "8 submission(s)" in summary
    assert "Feedback:" not in summary


def test_junk_is_left_out_with_a_note_and_the_modules_graded(graded_class):
    junk = _by_name(graded_class)["junk"]
    assert _item(junk)["points"] == 10
    note = " ".join(junk["notes"])
    for said in ("1 symbolic link(s) (link.py)", "1 FIFO(s) (stray.fifo)",
                 "100,003 file(s) other than .py", "1 .py file(s) over 1 MiB (huge.py)"):
        assert said in note
    assert "not copied for grading" in (graded_class["out"] / "feedback" / "junk.md").read_text()


def test_missing_path_and_fifo_notebook_are_graded_zero_with_a_reason(graded_class):
    results = _by_name(graded_class)
    assert "no such file or folder" in _item(results["missing"])["message"]
    assert "not a regular file" in " ".join(results["fifo"]["notes"])
    root = graded_class["root"]
    assert f"{root}/missing: no such file or folder" in graded_class["stderr"]


def test_a_huge_error_is_capped_cleaned_and_kept_once(graded_class):
    """Every call raises a 16 MiB message full of escape sequences (the readers' caps on
    larger files, and on .npz bombs, are tested above: the worker itself keeps 1,800
    characters of an error, and a submission cannot write the results' folder)."""
    hostile = _by_name(graded_class)["hostile"]
    checks = _item(hostile)["checks"]
    first = checks[0]["message"]
    assert first.startswith("raised RuntimeError: ") and "zzz" in first
    assert first.endswith(f"(the same error in {len(checks) - 1} more cases)")
    assert len(first) < safe_io.ERROR_CHARS + 200
    assert all(c["message"] == f"the same error as {checks[0]['case']}" for c in checks[1:])
    out = graded_class["out"]
    sizes = [p.stat().st_size for p in [*out.glob("*.json"), *out.glob("feedback/*.*")]
             if p.is_file()]
    assert max(sizes) < 400_000
    # the grader's peak memory (and its workers'): far below the 1.6 GB of np.load
    assert graded_class["peak_kb"] < 1_000_000


def test_no_control_sequence_reaches_the_terminal_or_the_reports(graded_class):
    texts = [graded_class["stdout"], graded_class["stderr"]]
    texts += [p.read_text(errors="replace") for p in graded_class["out"].rglob("*")
              if p.is_file() and p.suffix in (".json", ".md", ".html", ".csv")]
    for text in texts:  # (the source line quoted in an error may spell them out: harmless)
        for bad in ("\x1b", "\x07", "\x9b", "\x00"):
            assert bad not in text


def test_regrading_one_submission_keeps_the_others(graded_class, tmp_path):
    out = tmp_path / "grades"
    shutil.copytree(graded_class["out"], out)
    before = {r["id"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    time.sleep(1)  # a new date for the row graded again
    proc = _grader(str(graded_class["root"] / "class" / "a_b"), *FAST, "--out", str(out))
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    after = {r["id"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert set(after) == set(before)
    for sid, row in after.items():
        if sid == "a_b":
            assert row["graded"] > before[sid]["graded"] and row["total"] == "10"
        else:
            assert row == before[sid]
    assert len(list(out.glob("*.json"))) == len(before)
    assert "8 submission(s)" in (out / "feedback" / "summary.html").read_text()


# ---------------------------------------------------------------------------------------
# SIGTERM


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie, killed and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_sigterm_kills_every_job_and_keeps_the_grades_written(tmp_path):
    temp = tmp_path / "tmp"  # the grader's temp folders, apart from other runs'
    temp.mkdir()
    sleeper = tmp_path / "sleeper"
    sleeper.mkdir()
    (sleeper / "gemm_1_naive.py").write_text(textwrap.dedent("""
        import time
        def gemm_naive(A, B, C, alpha, beta):
            while True:
                time.sleep(1000)
    """))
    out = tmp_path / "grades"
    proc = _grader(str(sleeper), *FAST, "--out", str(out), env={"TMPDIR": str(temp)})
    deadline = time.time() + 600  # a loaded machine can take minutes to start a job
    while not _processes_with(f"{temp}/grader-") and time.time() < deadline:
        time.sleep(0.2)  # until the job's worker runs
    jobs = _processes_with(f"{temp}/grader-")
    assert jobs, "the job never started"
    time.sleep(2)
    assert any(_alive(p) for p in jobs), "the job ended by itself"  # so the stop kills it
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, stderr.decode()[-2000:]
    assert "stopped by SIGTERM" in stderr.decode()

    def survivors() -> list[int]:
        return _processes_with(str(temp)) + [p for p in jobs if _alive(p)]

    deadline = time.time() + 10  # killed ones may stay zombies a moment
    while survivors() and time.time() < deadline:
        time.sleep(0.2)
    assert survivors() == []
    assert list(temp.iterdir()) == []  # no grader-*, nnkit-job-* or nnkit-kit-* left
    assert (out / "grades.csv").exists()  # the (empty) gradebook is written
