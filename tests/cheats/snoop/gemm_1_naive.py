"""Cheat: look for the answer outside the submission. It tries to read the solution, the
kit's git history, another student's submission, the grader's reports, the grader's
environment and the network; if the solution is readable, it runs the solution's kernel.
Otherwise it raises, listing what each attempt met."""

import json
import os
import socket
from pathlib import Path

KIT = Path("@KIT_ROOT@")
seen = {}
solution_source = None


def _try(label, action):
    try:
        seen[label] = str(action())[:40]
    except Exception as err:  # noqa: BLE001
        seen[label] = type(err).__name__
        return None
    return seen[label]


if _try("solution", lambda: (KIT / "solution" / "gemm_1_naive.py").read_text()[:10]):
    solution_source = (KIT / "solution" / "gemm_1_naive.py").read_text()
_try("git", lambda: (KIT / ".git" / "HEAD").read_text())
_try("other", lambda: sorted(os.listdir("@OTHER@")))
_try("reports", lambda: sorted(os.listdir("@OUT@")))
_try("workroot", lambda: sorted(os.listdir(Path.cwd().parents[2])))
seen["secret"] = "NNKIT_TEST_SECRET" in os.environ
seen["interfaces"] = sorted(name for _, name in socket.if_nameindex())
seen["uid"] = os.getuid()


def gemm_naive(A, B, C, alpha, beta):
    if solution_source is not None:
        space = {"__name__": "stolen"}
        exec(compile(solution_source, "stolen.py", "exec"), space)
        return space["gemm_naive"](A, B, C, alpha, beta)
    raise RuntimeError("SNOOP " + json.dumps(seen, sort_keys=True))
