"""A kernel must be the version its file names (grader/checks/gemm_structure.py): the
naive kernel copied into the shared-memory and register files computes every case right,
and earns neither item; nor does a naive kernel that keeps a token shared array. The
solution's kernels pass. Graded in the simulator, where the counted call runs."""

from __future__ import annotations

import json
import shutil

import pytest

from grader.cases.gemm import GemmCase
from grader.checks import gemm_structure
from tests.conftest import KIT_ROOT, run_kit

NAIVE = (KIT_ROOT / "solution" / "gemm_1_naive.py").read_text()
# A shared array written and read, so that the kernel "uses" shared memory, while every
# product still reads A and B from global memory.
TOKEN = '''
    token = cuda.shared.array(1, np.float32)
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        token[0] = 1.0
    cuda.syncthreads()
    j, i = cuda.grid(2)'''


# A red team's: no shared memory at all. Each thread computes three adjacent elements of
# a row of C from global memory (1.33 loads per multiply-add, under the 1.5 allowed), and
# the launch asks for 4 bytes of dynamic shared memory it never touches.
MICROTILE = '''
import numpy as np

from nnkit.backend import cuda


@cuda.jit
def gemm_shared_kernel(A, B, C, alpha, beta):
    jx, i = cuda.grid(2)
    M, N = C.shape
    j = jx * 3
    if i < M and j < N:
        acc = cuda.local.array(3, np.float32)
        for c in range(3):
            acc[c] = 0.0
        for k in range(A.shape[1]):
            a = A[i, k]
            for c in range(3):
                if j + c < N:
                    acc[c] += a * B[k, j + c]
        for c in range(3):
            if j + c < N:
                C[i, j + c] = alpha * acc[c] + (beta * C[i, j + c] if beta != 0 else 0.0)


def gemm_shared(A, B, C, alpha, beta):
    M, N = C.shape
    grid = (((N + 2) // 3 + 31) // 32, (M + 7) // 8)
    gemm_shared_kernel[grid, (32, 8), 0, 4](A, B, C, np.float32(alpha), np.float32(beta))
'''


# A red team's (round six): 2x2 elements of C a thread straight from global memory (1.1
# loads per multiply-add), and a shared flag read at every step (0.3 shared loads per
# multiply-add) that nothing uses.
SHARED_TOKEN = '''
import numpy as np

from nnkit.backend import cuda


@cuda.jit
def gemm_shared_kernel(A, B, C, alpha, beta):
    flag = cuda.shared.array(1, np.float32)
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        flag[0] = 1.0
    cuda.syncthreads()
    i0 = cuda.blockIdx.y * 32 + 2 * cuda.threadIdx.y
    j0 = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    M, N = C.shape
    acc = cuda.local.array((2, 2), np.float32)
    for r in range(2):
        for c in range(2):
            acc[r, c] = 0.0
    for k in range(A.shape[1]):
        seen = flag[0]
        for r in range(2):
            for c in range(2):
                if i0 + r < M and j0 + 16 * c < N:
                    acc[r, c] += A[i0 + r, k] * B[k, j0 + 16 * c] * seen
    for r in range(2):
        for c in range(2):
            i, j = i0 + r, j0 + 16 * c
            if i < M and j < N:
                C[i, j] = alpha * acc[r, c] + (beta * C[i, j] if beta != 0 else 0.0)


def gemm_shared(A, B, C, alpha, beta):
    M, N = C.shape
    grid = ((N + 31) // 32, (M + 31) // 32)
    gemm_shared_kernel[grid, (16, 16)](A, B, C, np.float32(alpha), np.float32(beta))
'''


def _as(version: str, text: str = NAIVE) -> str:
    return text.replace("gemm_naive", f"gemm_{version}")


@pytest.mark.slow
def test_a_naive_kernel_under_another_versions_name_earns_nothing(tmp_path):
    naive = tmp_path / "naive_everywhere"
    token = tmp_path / "token_shared"
    for folder in (naive, token):
        shutil.copytree(KIT_ROOT / "solution", folder)
    microtile = shutil.copytree(KIT_ROOT / "solution", tmp_path / "shared_microtile")
    (microtile / "gemm_2_shared.py").write_text(MICROTILE)
    flagged = shutil.copytree(KIT_ROOT / "solution", tmp_path / "shared_token_read")
    (flagged / "gemm_2_shared.py").write_text(SHARED_TOKEN)
    (naive / "gemm_2_shared.py").write_text(_as("shared"))
    (naive / "gemm_3_register.py").write_text(_as("register"))
    tokened = _as("shared").replace("\n    j, i = cuda.grid(2)", TOKEN, 1)
    tokened = tokened.replace("acc += A[i, k] * B[k, j]", "acc += A[i, k] * B[k, j] * token[0]")
    assert "token[0]" in tokened
    (token / "gemm_2_shared.py").write_text(tokened)
    solution = shutil.copytree(KIT_ROOT / "solution", tmp_path / "solution")
    out = tmp_path / "out"
    result = run_kit("grader", str(naive), str(token), str(microtile), str(flagged),
                     str(solution),
                     "--parts", "gemm", "--kernels", "shared,register", "--jobs", "2",
                     "--seed", "5", "--out", str(out), env={"NNKIT_DEVICE": "sim"})
    assert result.returncode == 0, result.stderr[-3000:]

    def item(name: str, kernel: str) -> dict:
        report = json.loads((out / f"{name}.json").read_text())
        return next(i for i in report["items"] if i["id"] == f"gemm.{kernel}.correctness")

    for kernel in ("shared", "register"):
        assert item("solution", kernel)["points"] == item("solution", kernel)["max_points"]
    shared, register = item("naive_everywhere", "shared"), item("naive_everywhere", "register")
    assert shared["points"] == 0 and "reads nothing from shared memory" in shared["message"]
    assert register["points"] == 0, register
    assert "no kernel that computes the product" in register["message"], register
    tokened_item = item("token_shared", "shared")
    assert tokened_item["points"] == 0, tokened_item
    assert "return 0 of the 2701 elements of A and B" in tokened_item["message"]
    assert item("token_shared", "register")["points"] > 0
    microtile = item("shared_microtile", "shared")
    assert microtile["points"] == 0 and "reads nothing from shared memory" in microtile["message"]
    flagged_item = item("shared_token_read", "shared")
    assert flagged_item["points"] == 0, flagged_item
    assert "return 0 of the 2701 elements of A and B" in flagged_item["message"]


def _counts(**values: int) -> dict[str, dict]:
    return {"k": {"global_load_accesses": 0, "shared_load_accesses": 0, "storing_threads": 0,
                  "global_store_accesses": 64 * 64, **values}}


def test_the_version_rules_at_their_edges():
    case = GemmCase(64, 64, 16, 1.0, 0.0, seed=1)
    fmas = 64 * 64 * 16
    rule = gemm_structure.rule_problem
    least = fmas // 16  # the fewest shared loads of tiles (32x32 micro-tiles)
    shared_ok = _counts(global_load_accesses=int(1.5 * fmas), shared_load_accesses=least)
    assert rule("shared", shared_ok, case) == ""
    too_many = _counts(global_load_accesses=int(1.5 * fmas) + 1, shared_load_accesses=least)
    assert "values from global memory per multiply-add" in rule("shared", too_many, case)
    assert "nothing from shared" in rule("shared", _counts(), case)
    too_few = _counts(global_load_accesses=fmas, shared_load_accesses=least - 1)
    assert "0.062 values per multiply-add from shared" in rule("shared", too_few, case)
    operands = 64 * 16 * 2  # A and B of the 64x64x16 case
    staged = _counts(global_load_accesses=fmas // 8, shared_load_accesses=2 * fmas,
                     operand_elements=operands, shared_operand_elements=operands // 3 + 1)
    assert rule("shared", staged, case) == ""
    one_value = {"k": {**staged["k"], "shared_operand_elements": 1}}
    assert "return 1 of the 2048 elements of A and B" in rule("shared", one_value, case)
    # A red team's: three elements of C a thread straight from global memory (1.33 loads
    # per multiply-add), and dynamic shared memory asked for and never used.
    unused = _counts(global_load_accesses=fmas * 4 // 3, dynamic_shared_bytes=4)
    assert "nothing from shared" in rule("shared", unused, case)
    share = fmas // 64
    assert rule("register", _counts(storing_threads=64 * 64 * 2 // 3, shared_load_accesses=share),
                case) == ""
    assert "no kernel" in rule("register", _counts(storing_threads=64 * 64 * 2 // 3 + 1,
                                                   shared_load_accesses=share), case)
    # Few threads but hardly any loads: a decoy beside a naive product kernel.
    decoy = {"decoy": {"global_load_accesses": share - 1, "storing_threads": 64},
             "naive": {"global_load_accesses": 2 * fmas, "storing_threads": 64 * 64}}
    assert "no kernel" in rule("register", decoy, case)
    assert rule("naive", _counts(storing_threads=10 ** 6), case) == ""
    # A kernel scaling C by beta (a thread per element, more counted loads than a product
    # kernel whose tiles sit in uncounted dynamic shared memory) beside the product's.
    epilogue = {"scale": {"global_load_accesses": 2 * 64 * 64, "storing_threads": 64 * 64},
                "product": {"global_load_accesses": fmas // 32, "storing_threads": 256,
                            "global_store_accesses": 64 * 64,
                            "dynamic_shared_bytes": 32768}}
    assert rule("register", epilogue, case) == ""


def test_threads_past_the_edge_of_C_are_not_counted_as_computing():
    """A 2x2 micro-tile on 32x32 tiles (found by a correct submission that lost its
    points): on the counted 33x40 case its 4 blocks launch 1,024 threads for 1,320
    elements, but only the 17 x 20 threads inside C store anything."""
    case = GemmCase(33, 40, 37, 2.0, 5.0, seed=1)
    fmas = 33 * 40 * 37
    two_by_two = {"k": {"threads": 1024, "storing_threads": 17 * 20,
                        "global_store_accesses": 33 * 40,
                        "shared_load_accesses": fmas, "global_load_accesses": fmas // 16}}
    assert gemm_structure.rule_problem("register", two_by_two, case) == ""
    naive = {"k": {"threads": 1024 + 256, "storing_threads": 33 * 40,
                   "global_load_accesses": 2 * fmas}}
    assert "stored by 1320 threads" in gemm_structure.rule_problem("register", naive, case)


def test_a_decoy_kernel_that_stores_almost_nothing_is_not_the_product():
    """A red team's: a naive kernel, and beside it a one-thread kernel that reads all of A
    (a product's share of loads) and stores C[0, 0] back. The blocked kernel must store a
    value per element of C."""
    case = GemmCase(33, 40, 37, 2.0, 5.0, seed=1)
    counts = {"naive": {"storing_threads": 1320, "global_store_accesses": 1320,
                        "global_load_accesses": 2 * 33 * 40 * 37},
              "decoy": {"storing_threads": 1, "global_store_accesses": 1,
                        "global_load_accesses": 33 * 37}}
    assert "no kernel" in gemm_structure.rule_problem("register", counts, case)


def test_a_gpu_run_checks_the_version_on_one_call_in_the_simulator(tmp_path):
    """A GPU counts no memory traffic, so a GPU run asks the simulator: the counted call
    run there once. A naive kernel in the register file fails the rule; the solution
    passes; a kernel that fails in the simulator is not shown to be its version and fails
    (a launcher raising there only, `hasattr(C, "get")`, kept a naive kernel's points)."""
    from grader.parts.gemm import version_on_simulator
    from grader.scoring import load_config

    config = load_config()
    folders = {}
    for name in ("solution", "naive", "broken"):
        folders[name] = shutil.copytree(KIT_ROOT / "solution", tmp_path / name)
    (folders["naive"] / "gemm_3_register.py").write_text(_as("register"))
    (folders["broken"] / "gemm_3_register.py").write_text(
        _as("register").replace("def gemm_register(", "def gemm_register(*a):\n    raise "
                                "RuntimeError('no simulator here')\n\ndef _unused("))
    found = {name: version_on_simulator("register", folder, tmp_path / f"work-{name}", config)
             for name, folder in folders.items()}
    assert found["solution"] == ("", [])
    assert "no kernel that computes the product" in found["naive"][0]
    why, _ = found["broken"]
    assert "version could not be checked" in why and "no simulator here" in why
    assert version_on_simulator("naive", folders["naive"], tmp_path / "n", config) == ("", [])
