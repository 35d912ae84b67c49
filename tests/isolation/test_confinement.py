"""What a job sees of the machine, asked from inside the sandbox by a script of its own
(the submissions of tests/cheats/ are stopped by the audit hook before they can look, so
the jail is probed here without it): a clean environment, loopback only, a uid of its
own, and nothing of the kit but the staged copy."""

import json
import os
import subprocess
import sys

import pytest

from grader.isolation import probe, sandbox
from tests.conftest import KIT_ROOT

SECRET = "NNKIT_CONFINEMENT_SECRET"
PROBE = f"""
import json, os, socket, sys
seen = {{"secret": {SECRET!r} in os.environ, "uid": os.getuid(),
        "interfaces": sorted(n for _, n in socket.if_nameindex())}}
for label, path in (("solution", {str(KIT_ROOT / "solution" / "gemm_1_naive.py")!r}),
                    ("git", {str(KIT_ROOT / ".git" / "HEAD")!r}),
                    ("tests", {str(KIT_ROOT / "tests" / "test_cheats.py")!r})):
    try:
        open(path).read(1)
        seen[label] = "read"
    except OSError as err:
        seen[label] = type(err).__name__
import grader, nnkit
seen["grader"] = sorted(os.listdir(os.path.dirname(grader.__file__)))
print(json.dumps(seen))
"""


def _probe(tmp_path) -> tuple[dict, sandbox.Capabilities]:
    settings = sandbox.Settings()
    caps = probe.capabilities(settings)
    workdir = tmp_path / "job"
    workdir.mkdir()
    os.environ[SECRET] = "grader secret"
    try:
        with sandbox.Sandbox(settings, caps, workdir, on_gpu=False) as box:
            result = subprocess.run(box.command([sys.executable, "-P", "-c", PROBE], workdir),
                                    cwd=workdir, env=box.env, capture_output=True, text=True,
                                    timeout=120, start_new_session=True)
    finally:
        del os.environ[SECRET]
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), caps


def test_a_job_sees_a_clean_environment_and_none_of_the_kit(tmp_path):
    seen, caps = _probe(tmp_path)
    assert seen["secret"] is False
    # the staged package (and its bytecode), nothing else
    assert seen["grader"] == ["__init__.py", "__pycache__", "worker"]
    if not (caps.mount or caps.as_user):
        pytest.skip(f"no confinement of files here: {caps.describe(sandbox.Settings())}")
    for what in ("solution", "git", "tests"):
        assert seen[what] in ("FileNotFoundError", "PermissionError"), seen
    if caps.net:
        assert seen["interfaces"] == ["lo"], seen
    if caps.as_user:
        settings = sandbox.Settings()
        assert settings.uid_first <= seen["uid"] < settings.uid_first + settings.uid_count
