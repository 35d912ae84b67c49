"""Part 2's whole training runs, as verdicts from the worker's files: the trained
parameters (readable, float32, finite), and the audit of the calls (grader/worker/net.py's
audit_record): did every call launch the submission's kernels, did the calls recorded in
full replay to their outputs, and did the timed run launch its kernels as the audited
training of the same mode did?"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from grader import safe_io
from grader.checks.gemm import NOT_REPRODUCED, error_text
from nnkit import network

REPLAY_TOL = 1e-5  # relative max-norm between a call's outputs and their replay


def audit_problem(raw: object) -> str | None:
    """The verdict on a training's audit record (grader/worker/net.py's audit_record):
    None when every call launched the submission's kernels and every call recorded in
    full replayed to its outputs."""
    try:
        silent, audits = dict(raw["silent"]), list(raw["audits"])
    except (KeyError, TypeError, ValueError):
        return "no record of the training calls"
    for name, count in silent.items():
        if count:
            return (f"{count} call(s) of {safe_io.clean_text(name, 40)}() launched none of "
                    "the submission's kernels: training must run on your kernels")
    if not audits:
        return "no training call was recorded in full"
    for entry in audits:
        if not isinstance(entry, dict):
            return "no record of the training calls"
        if entry.get("missing") or not entry.get("worst_relative_difference", 0) <= REPLAY_TOL:
            return NOT_REPRODUCED.format(
                why=f"call {entry.get('call')} of {entry.get('function')}(): "
                    f"{entry.get('missing')} output(s) not in memory its kernels touched, "
                    f"largest relative difference {entry.get('worst_relative_difference')}")
    return None


def launch_pattern(raw: object) -> dict[str, dict[str, int]] | None:
    """Per training function, how many calls launched how many of the submission's
    kernels ({"forward": {"7": 610}, ...}), from an audit record; None if unreadable."""
    try:
        return {str(name): {str(int(k)): int(v) for k, v in dict(counts).items()}
                for name, counts in dict(raw["launches"]).items()}
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


# Calls whose launch count may differ between the timed and the audited run of a correct
# network: work done once per batch shape (a workspace filled at its first use) falls in
# the audited run's earlier mode but in the timed run's first epoch (two shapes: the full
# batch, met by the untimed warm-up step too, and the last, smaller one). A network that
# works otherwise when timed must do so in most calls to gain anything.
PATTERN_SLACK = 2


def pattern_problem(timed: dict | None, audited: dict | None) -> str | None:
    """Why the timed run's launch pattern is not the audited run's, or None. Both ran the
    same mode on the same batches, so a network that does its work the same way launches
    the same number of its kernels in every corresponding call."""
    if audited is None:
        return None  # no audited run to compare with (the solution's yardstick)
    if timed is None:
        return "the timed training left no record of its kernel launches"
    for name in sorted(set(timed) | set(audited)):
        mine, want = timed.get(name, {}), audited.get(name, {})
        keys = set(mine) | set(want)
        moved = max(sum(max(0, mine.get(k, 0) - want.get(k, 0)) for k in keys),
                    sum(max(0, want.get(k, 0) - mine.get(k, 0)) for k in keys))
        if moved > PATTERN_SLACK:
            def say(pattern: dict[str, int]) -> str:
                return ", ".join(f"{c} call(s) launching {k}" for k, c in sorted(
                    pattern.items(), key=lambda kv: int(kv[0]))[:4]) or "no call"
            return (f"it launched your kernels otherwise than the audited training of the "
                    f"same mode: {safe_io.clean_text(name, 40)}(): {say(mine)} when timed, "
                    f"{say(want)} when audited (a timed run must do its work as the "
                    "audited one does)")
    return None


def load_params(outdir: Path, m: int | str, ref: network.Params,
                 stopped: str) -> tuple[dict, str | None]:
    """The parameters of file train-M.npz (or STEM.npz, for a str), or why there are none."""
    stem = m if isinstance(m, str) else f"train-{m}"
    err_file, npz_file = outdir / f"{stem}.err", outdir / f"{stem}.npz"
    if os.path.lexists(err_file):
        return {}, "training raised " + error_text(err_file)
    if not os.path.lexists(npz_file):
        return {}, f"no parameters ({stopped})"
    named = ref.named()
    try:
        got = safe_io.load_npz(npz_file, names=set(named), max_members=len(named),
                               max_bytes=safe_io.npz_cap(safe_io.nbytes(*named.values())))
    except (OSError, ValueError) as err:
        return {}, f"unreadable parameters ({safe_io.clean_text(err, 300)})"
    for key, value in ref.named().items():
        if key not in got:
            return {}, f"parameter {key} missing"
        if got[key].shape != value.shape or got[key].dtype != np.float32:
            return {}, (f"{key} came back as {got[key].dtype}{got[key].shape}, expected "
                        f"float32{value.shape}")
        if not np.isfinite(got[key]).all():
            return {}, f"{key} holds NaN or infinity after training"
    return got, None


def audit_problem_in(outdir: Path, m: int) -> str | None:
    """Did every training call launch the submission's kernels, and did the calls
    recorded in full replay to the same outputs?"""
    try:
        raw = safe_io.read_json(outdir / f"train-{m}.json", 4 << 20)
    except (OSError, ValueError):
        return "no record of the training calls"
    return audit_problem(raw)
