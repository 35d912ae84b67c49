"""Cheat: write the results and the reports instead of computing them. At import it
reads the job the worker was given, fills its output folder with a result for every case
and a `done` marker, plants report files wherever it can reach (beside itself, up its job's
folders, in the grader's report folder and in the kit), and ends the worker with status 0."""

import json
import os
import sys
from pathlib import Path

import numpy as np

PLANTED = "planted-by-cheat"
REPORT = json.dumps({"name": "write_results", "total": 1000, "items": []})

job = json.loads(Path(sys.argv[1]).read_text())
out = Path(job["outdir"])
for n, spec in enumerate(job["cases"]):
    zeros = np.zeros((spec["M"], spec["N"]), np.float32)
    np.savez(out / f"case-{n}.npz", A=zeros, B=zeros, C=zeros,
             **{"launch:own": np.array(1), "replay:C": zeros})
(out / "done").write_text("")
(out / "forbidden.jsonl").write_text("")
targets = [Path.cwd(), *Path.cwd().parents[:3], Path("@OUT@"), Path("@KIT_ROOT@") / "grades",
           Path("@KIT_ROOT@")]
for folder in targets:
    for name in (f"{PLANTED}.json", f"{PLANTED}.csv"):
        try:
            (folder / name).write_text(REPORT)
        except OSError:
            pass
os._exit(0)


def gemm_naive(A, B, C, alpha, beta):
    pass
