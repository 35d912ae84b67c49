"""Part 2 submissions that cheat (tests/cheats_net/, described in its README), graded in one
simulator run beside the solution: each cheat earns nothing on the items it cheats in,
with a message saying what caught it, and keeps the points of the items it does not
touch (its other module is the solution's); the solution keeps every point. The timed
job (net.performance, graded on a GPU only) is tried in the simulator by its own test."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil

import pytest

from grader.cases.net import ITEMS
from grader.examples import load_spec, materialize
from grader.scoring import DEFAULT_CONFIG
from tests.conftest import KIT_ROOT, TESTS, run_kit, selected_values
from tests.trust.test_cheats import _procs_of_uids

CHEATS = TESTS / "cheats_net"
NAMES = sorted(p.name for p in CHEATS.iterdir() if p.is_dir())
MODULES = ("net_1_kernels.py", "net_2_backprop.py")
EDITS = "edits.toml"
# Uids of this test's jobs only (test_cheats.py and test_cheats_mpi.py use lower ranges).
UID_FIRST = 150000 + os.getpid() % 10000 * 4
ALL = {*ITEMS, "net.agreement", "net.accuracy", "net.performance"}
# Items the network module's policy verdict covers (grader/parts/net.py's BACKPROP_ITEMS)
BACKPROP = ("net.sgd", "net.forward", "net.backward")
NOT_REPRODUCED = "not what the kernels the call launched compute"

# Each cheat: the items it must lose, and a fragment (a regular expression) of each
# item's message. Every other item graded in the simulator keeps its points (accuracy and
# performance are not graded there: no points either way).
EXPECTED = {
    "host_forward_alibi": {"net.forward": NOT_REPRODUCED, "net.agreement": NOT_REPRODUCED},
    "nnkit_reference": {**{i: "rules for graded code.*nnkit" for i in BACKPROP},
                        "net.agreement": "rules for graded code.*nnkit"},
    # `import sys` is a note, but the policy refuses sys.modules (the replay caught it
    # before, in net.forward and net.agreement only).
    "reference_via_sys_modules": {**{i: "rules for graded code.*sys.modules" for i in BACKPROP},
                                  "net.agreement": "rules for graded code.*sys.modules"},
    "host_kernels": {"net.kernels": NOT_REPRODUCED, "net.forward": NOT_REPRODUCED,
                     "net.agreement": NOT_REPRODUCED},
    # No two of softmax's own cases share a shape, so it is honest there; backward's
    # second case of a shape gets the first one's outputs.
    "cached_softmax": {"net.backward": "relative max-norm error|" + NOT_REPRODUCED,
                       "net.agreement": NOT_REPRODUCED},
    "honest_first_call": {"net.sgd": NOT_REPRODUCED, "net.agreement": NOT_REPRODUCED},
    # The unit cases replay on other inputs; the training's calls on their own (a gap).
    "scalar_smuggle": {"net.kernels": NOT_REPRODUCED, "net.forward": NOT_REPRODUCED},
    "monkeypatch_runner": {**{i: "rules for graded code.*nnkit" for i in BACKPROP},
                           "net.agreement": "rules for graded code.*nnkit"},
    "patch_replay": {i: "changed the kit|rules for graded code"
                     for i in (*ITEMS, "net.agreement")},
    "mutate_inputs": {"net.kernels": "modified its input A",
                      "net.backward": "modified its input A"},
    # The functions' job is stopped by the audit hook; the training's verdict comes from
    # the policy first (np.savez in graded code), read before the job runs.
    "forge_results": {**{i: "opened a file outside its folder.*train-0.npz" for i in ITEMS},
                      "net.agreement": "rules for graded code.*savez"},
    "rewrite_source": {**{i: "rules for graded code.*nnkit" for i in BACKPROP},
                       "net.agreement": "rules for graded code.*nnkit"},
    # Honest wherever it is graded in the simulator: net.performance, its target, is
    # graded on a GPU; test_a_network_that_knows_it_is_timed_gains_nothing tries it.
    "detect_timing": {},
}
# What `make test` grades: a host computation beside an empty kernel (the replay) and the
# solution (about a minute on 2 cores); the other cheats are marked slow.
QUICK = {"host_kernels"}


def _sweep(names: list[str]) -> list:
    return [pytest.param(n, marks=() if n in QUICK | {"solution"} else pytest.mark.slow)
            for n in names]


def _submission(name: str, dest) -> object:
    """The cheat's module over a copy of the solution, or the solution edited as its
    edits.toml says (grader/examples.py's format: a cheat that changes a few functions
    follows the solution as it evolves)."""
    edits = CHEATS / name / EDITS
    if edits.is_file():
        return materialize(dataclasses.replace(load_spec(edits), name=name), dest)
    folder = shutil.copytree(KIT_ROOT / "solution", dest / name)
    for path in (CHEATS / name).iterdir():
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    names = [n for n in NAMES if n in selected_values(request, "name")]
    tmp = tmp_path_factory.mktemp("cheats-net")
    out, subs = tmp / "out", tmp / "subs"
    solution = shutil.copytree(KIT_ROOT / "solution", subs / "solution")
    folders = [_submission(n, subs) for n in names]
    config = DEFAULT_CONFIG.read_text()
    for old, new in (("uid_first = 64000", f"uid_first = {UID_FIRST}"),
                     ("uid_count = 64", "uid_count = 4")):
        assert old in config
        config = config.replace(old, new)
    (tmp / "config.toml").write_text(config)
    result = run_kit("grader", *(str(f) for f in folders), str(solution),
                     "--parts", "net", "--seed", "1", "--jobs", "2",
                     "--config", str(tmp / "config.toml"), "--out", str(out))
    leftovers = _procs_of_uids(UID_FIRST, 4)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    return {"reports": reports, "leftovers": leftovers}


def _items(graded, name) -> dict[str, dict]:
    return {i["id"]: i for i in graded["reports"][name]["items"]}


def test_every_folder_is_expected():
    assert set(EXPECTED) == set(NAMES)
    for name in NAMES:  # a network module or edits of the solution's, nothing else
        files = {p.name for p in (CHEATS / name).iterdir()}
        assert files in ({EDITS},) or files & set(MODULES) and files <= set(MODULES), \
            (name, files)


@pytest.mark.parametrize("name", _sweep(["solution"]))
def test_the_solution_keeps_every_point(graded, name):
    items = _items(graded, name)
    assert set(items) == ALL
    for item in items.values():
        if item["points"] is not None:
            assert item["points"] == item["max_points"] > 0, (item["id"], item["message"])


@pytest.mark.parametrize("name", _sweep(sorted(EXPECTED)))
def test_every_cheat_loses_its_items_with_a_clear_message(graded, name):
    items = _items(graded, name)
    assert set(items) == ALL
    for item_id, item in items.items():
        if item["points"] is None:  # not graded in the simulator
            assert item_id in ("net.accuracy", "net.performance"), item
        elif item_id in EXPECTED[name]:
            assert item["points"] == 0 and item["status"] == "fail", (item_id, item["message"])
            assert re.search(EXPECTED[name][item_id], item["message"]), (item_id,
                                                                         item["message"])
        else:
            assert item["points"] == item["max_points"], (item_id, item["message"])


def test_no_process_of_the_jobs_is_left(graded):
    assert not graded["leftovers"]


@pytest.mark.slow
def test_a_network_that_knows_it_is_timed_gains_nothing(tmp_path):
    """net.performance's job in the simulator (on a GPU it runs on MNIST): detect_timing
    works honestly until it believes it is timed, then computes on the host beside an
    empty kernel. Its timed steps launch as many kernels as the audited ones, but the
    steps recorded in full and replayed show the host work; the solution's run passes."""
    from grader.parts import net as net_part
    from grader.scoring import load_config

    config = load_config()
    reference = net_part.train_reference(net_part.training_plan(False))
    runs = {}
    for name in ("solution", "detect_timing"):
        source = KIT_ROOT / "solution" if name == "solution" else _submission(name, tmp_path)
        copy = net_part.fresh_copy(tmp_path / f"w-{name}", source)
        # The cheat's audited training is the solution's (it is honest there).
        audited = runs["solution"].launches if name != "solution" else None
        runs[name] = net_part.time_training(copy, tmp_path / f"w-{name}", config, reference,
                                            on_gpu=False, audited=audited)
    assert runs["solution"].seconds is not None, runs["solution"].message
    assert set(runs["solution"].launches) == {"forward", "backward", "sgd_step"}
    cheat = runs["detect_timing"]
    assert cheat.seconds is None and NOT_REPRODUCED in cheat.message, cheat.message
