"""What the machine allows, probed once per grading process: the first confinement that
starts a worker which imports numpy (and the GPU, on one) is the one jobs get.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from grader.isolation.cgroups import cgroup_support
from grader.isolation.sandbox import Sandbox
from grader.isolation.settings import WORKER_MODULE, Capabilities, Settings

_caps: dict[tuple[Settings, bool], Capabilities] = {}
_caps_lock = threading.Lock()


def capabilities(settings: Settings, on_gpu: bool = False) -> Capabilities:
    """The best confinement that works here, tried with a real interpreter start (on a
    GPU, one that also starts CUDA)."""
    with _caps_lock:
        if (settings, on_gpu) not in _caps:
            _caps[settings, on_gpu] = _probe(settings, on_gpu)
        return _caps[settings, on_gpu]


def _candidates(settings: Settings, on_gpu: bool) -> list[Capabilities]:
    if settings.mode == "off":
        return []
    net = not settings.network
    every = dict(mount=True, pid=True, net=net, ipc=True, uts=True)
    # Best first: the allow-list root; the deny-list where pivot_root fails; then fewer
    # namespaces, as the kernel allows.
    full = [dict(every, root=True), every, dict(mount=True, pid=True, net=net),
            dict(mount=True, pid=True), dict(mount=True), dict()
            ] if settings.namespaces else [dict()]
    if os.geteuid() == 0:
        group, why = cgroup_support(settings)
        chosen = [Capabilities(as_user=True, cgroup=group, cgroup_note=why, **c) for c in full]
    else:
        chosen = [Capabilities(user_namespace=True, **c) for c in full if c]
    if not on_gpu:
        return chosen
    # The memory limit is the part least sure to suit CUDA: without it before less isolation.
    return [c for caps in chosen for c in (caps, replace(caps, memory_limit=False))]


PROBE = "import numpy, {module}"
PROBE_GPU = ("; from nnkit.backend import cuda, select, to_device; select()"
             "; cuda.current_context(); float(to_device(numpy.ones(4)).sum())")


def _probe(settings: Settings, on_gpu: bool) -> Capabilities:
    first_error = ""
    for caps in _candidates(settings, on_gpu):
        with tempfile.TemporaryDirectory(prefix="nnkit-probe-") as tmp:
            workdir = Path(tmp) / "job"
            workdir.mkdir()
            box = Sandbox(settings, caps, workdir, on_gpu=on_gpu, probing=True)
            with box:
                code = PROBE.format(module=WORKER_MODULE) + (PROBE_GPU if on_gpu else "")
                argv = [sys.executable, "-P", "-c", code]
                try:
                    result = subprocess.run(box.command(argv), cwd=workdir, env=box.env,
                                            stdin=subprocess.DEVNULL, capture_output=True,
                                            text=True, timeout=120, start_new_session=True)
                    ok, why = result.returncode == 0, result.stderr.strip()[-300:]
                except (OSError, subprocess.SubprocessError) as err:
                    ok, why = False, str(err)
        if ok:
            return replace(caps, note=f"the first choice failed: {first_error}"
                           if first_error else "")
        if not first_error:
            first_error = (why.splitlines() or ["no reason given"])[-1]
    if settings.mode == "off":
        return Capabilities(note="[sandbox] mode is off")
    return Capabilities(note=f"no confinement works here: {first_error}")


# ---------------------------------------------------------------------------------------
