"""The kit's integrity check (grader/isolation/integrity.py): a copy of the kit is modified after
its manifest was written, and grading is refused with the file named; in a git checkout,
a modification the manifest blessed is still caught against HEAD."""

import shutil
import subprocess
import sys

import pytest

from grader.isolation import integrity
from nnkit.submission import KIT_ROOT


@pytest.fixture
def kit(tmp_path):
    """A copy of the kit's code (what the manifest covers, and what grading imports)."""
    root = tmp_path / "kit"
    for name in integrity.TREES:
        shutil.copytree(KIT_ROOT / name, root / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def _run(kit, *args):
    """`python -m ...` in the copy: its own grader and nnkit are imported."""
    return subprocess.run([sys.executable, "-m", *args], cwd=kit, capture_output=True,
                          text=True, timeout=300)


def _git(kit, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(kit), *args],
                   check=True, capture_output=True)


def test_manifest_names_every_changed_added_and_missing_file(kit, tmp_path):
    manifest = tmp_path / "manifest.json"
    written = integrity.write(manifest, kit)
    assert "grader/checks/gemm.py" in written["files"] and "grader/config.toml" in \
        written["files"] and "solution/gemm_1_naive.py" in written["files"]
    assert integrity.verify(manifest, kit, git=False) == []
    (kit / "grader" / "__pycache__").mkdir(exist_ok=True)
    (kit / "grader" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"not covered")
    assert integrity.verify(manifest, kit, git=False) == []
    with open(kit / "grader" / "checks" / "gemm.py", "a") as f:
        f.write("# rewritten by a submission\n")
    (kit / "grader" / "worker_evil.py").write_text("")
    (kit / "solution" / "gemm_2_shared.py").unlink()
    assert integrity.verify(manifest, kit, git=False) == [
        "grader/checks/gemm.py: changed since the manifest",
        "solution/gemm_2_shared.py: missing (in the manifest)",
        "grader/worker_evil.py: added (not in the manifest)"]
    assert integrity.verify(tmp_path / "none.json", kit, git=False)[0].endswith(
        "no readable manifest (" + f"[Errno 2] No such file or directory: "
        f"'{tmp_path / 'none.json'}')")


def test_grading_is_refused_with_the_file_named(kit, tmp_path):
    course = tmp_path / "course"
    manifest = str(course / integrity.COURSE_MANIFEST)
    written = _run(kit, "grader.isolation.integrity", "write", manifest)
    assert written.returncode == 0, written.stderr
    assert _run(kit, "grader.isolation.integrity", "check", str(course / integrity.COURSE_MANIFEST)
                ).returncode == 0
    with open(kit / "grader" / "checks" / "gemm.py", "a") as f:
        f.write("# rewritten by a submission\n")

    check = _run(kit, "grader.isolation.integrity", "check", manifest)
    assert check.returncode == 1 and "grader/checks/gemm.py: changed" in check.stderr

    out = tmp_path / "grades"
    graded = _run(kit, "grader", "solution", "--parts", "gemm", "--kernels", "naive",
                  "--out", str(out), "--manifest", str(course / integrity.COURSE_MANIFEST))
    assert graded.returncode == 1 and "grader/checks/gemm.py: changed" in graded.stderr
    assert not out.exists()

    autograde = _run(kit, "grader.course.nbcourse", "autograde", "--course", str(course),
                     "--allow-uncommitted")
    assert autograde.returncode == 1, autograde.stderr
    assert "refusing to grade" in autograde.stderr
    assert "grader/checks/gemm.py: changed" in autograde.stderr
    assert sorted(p.name for p in course.iterdir()) == [integrity.COURSE_MANIFEST]


def test_git_catches_a_change_the_manifest_blessed(kit, tmp_path):
    assert not integrity.is_git_checkout(kit) and integrity.git_changes(kit) == []
    _git(kit, "init", "-q")
    _git(kit, "add", "-A")
    _git(kit, "commit", "-q", "-m", "kit")
    assert integrity.is_git_checkout(kit) and integrity.git_changes(kit) == []
    with open(kit / "nnkit" / "checks.py", "a") as f:
        f.write("# modified before the release\n")
    (kit / "grader" / "worker_evil.py").write_text("")
    manifest = tmp_path / "course" / integrity.COURSE_MANIFEST
    assert integrity.write(manifest, kit)["git_commit"]
    assert integrity.verify(manifest, kit, git=False) == []  # blessed
    assert integrity.verify(manifest, kit) == ["nnkit/checks.py: differs from git HEAD",
                                               "grader/worker_evil.py: not in git HEAD"]
    refused = _run(kit, "grader.course.nbcourse", "autograde", "--course", str(manifest.parent))
    assert refused.returncode == 1 and "nnkit/checks.py: differs from git HEAD" in refused.stderr
    _git(kit, "checkout", "nnkit/checks.py")
    (kit / "grader" / "worker_evil.py").unlink()
    assert integrity.git_changes(kit) == []
