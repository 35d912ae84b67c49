"""The paper's implementations against the CPU reference (nnkit.paper), on tiny nets.

Every implementation must stay within nnkit.paper.bounds' float32 error bound of the
exact (float64) gradients and of the exact parameters after one SGD step; the bound is
derived, not tuned (see that module), and a test below checks that it catches a wrong
gradient.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnkit import network
from nnkit.paper import bounds, flops
from nnkit.paper.arraynet import ArrayRunner, numpy_ops
from nnkit.paper.blas import blas_threads
from nnkit.training import TrainConfig

NETS = {"1 hidden": [6, 5, 3], "2 hidden": [7, 6, 5, 3]}
LAM, LR = 0.3, 0.5  # a large lambda, so that a wrong L2 term shows


def problem(sizes: list[int], n: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    params = network.glorot_uniform(sizes, seed)
    for b in params.biases:  # non-zero biases exercise their gradients
        b += rng.normal(0, 0.3, b.shape).astype(np.float32)
    X = rng.random((n, sizes[0]), dtype=np.float32)
    return params, X, rng.integers(0, sizes[-1], n)


def config(sizes: list[int], loss: str) -> TrainConfig:
    return TrainConfig(tuple(sizes[1:-1]), batch=5, epochs=1, lr=LR, lam=LAM, loss=loss)


def check_gradient(grads: network.Params, params, X, labels, loss) -> None:
    exact, bound = bounds.gradient_bounds(params, X, labels, LAM, loss)
    assert all(g.dtype == np.float32 for g in grads.weights + grads.biases)
    assert bounds.worst_ratio(grads, exact, bound) <= 1.0


def check_step(after: network.Params, params, X, labels, loss) -> None:
    exact, bound = bounds.gradient_bounds(params, X, labels, LAM, loss)
    exact_after, step_bound = bounds.step_bounds(params, exact, bound, LR)
    assert bounds.worst_ratio(after, exact_after, step_bound) <= 1.0


def loop_runner(name: str, params, cfg):
    from nnkit.paper import fused, matpar
    from nnkit.paper.naive import NaiveRunner
    from nnkit.paper.threads import ThreadsRunner

    return {"naive": lambda: NaiveRunner(params, cfg),
            "threads": lambda: ThreadsRunner(params, cfg),
            "matpar": lambda: matpar.runner(params, cfg),
            "arrays": lambda: ArrayRunner(numpy_ops(np), params, cfg),
            "fused": lambda: fused.runner(params, cfg)}[name]()


@pytest.mark.parametrize("loss", network.LOSSES)
@pytest.mark.parametrize("net", NETS)
@pytest.mark.parametrize("name", ["naive", "threads", "matpar", "arrays", "fused"])
def test_cpu_implementations_match_the_reference(name, net, loss):
    sizes = NETS[net]
    params, X, labels = problem(sizes)
    runner = loop_runner(name, params, config(sizes, loss))
    grads, mean_loss = runner.gradient(X, labels)
    check_gradient(grads, params, X, labels, loss)
    per_sample, _ = network.output_loss_and_delta(
        network.forward(params.copy(np.float64), X.astype(np.float64))[-1], labels, loss)
    assert mean_loss == pytest.approx(per_sample.mean(), rel=1e-5)
    runner.step(*runner.epoch_data(X, labels, np.arange(len(labels))))
    check_step(runner.params(), params, X, labels, loss)


@pytest.mark.parametrize("threads", [1, None])
@pytest.mark.parametrize("loss", network.LOSSES)
def test_blas_one_thread_and_all_cores(threads, loss):
    from nnkit.paper import blas

    sizes = NETS["2 hidden"]
    params, X, labels = problem(sizes)
    with blas_threads(threads):
        info = blas.blas_info()
        grads, _ = network.backward(params, network.forward(params, X), labels, LAM, loss)
        runner = blas.runner(params, config(sizes, loss))
        runner.step(*runner.epoch_data(X, labels, np.arange(len(labels))))
    assert info and all(b["num_threads"] == (threads or blas.cores()) for b in info)
    check_gradient(grads, params, X, labels, loss)
    check_step(runner.params(), params, X, labels, loss)


def test_bound_catches_wrong_gradients():
    params, X, labels = problem(NETS["2 hidden"])
    grads, _ = network.backward(params, network.forward(params, X), labels, LAM)
    check_gradient(grads, params, X, labels, "ce")
    doubled_l2 = network.Params([g + LAM * W for g, W in zip(grads.weights, params.weights,
                                                             strict=True)], grads.biases)
    lost_mean = network.Params([g * len(X) for g in grads.weights], grads.biases)
    for wrong in (doubled_l2, lost_mean):
        exact, bound = bounds.gradient_bounds(params, X, labels, LAM, "ce")
        assert bounds.worst_ratio(wrong, exact, bound) > 100


# ---------------------------------------------------------------------------------------
# The thread-parallel reduction


def test_share_bounds_are_contiguous_and_uneven():
    from nnkit.paper.threads import share_bounds

    assert share_bounds(5, 3).tolist() == [0, 2, 4, 5]
    assert share_bounds(2, 4).tolist() == [0, 1, 2, 2, 2]  # two empty shares
    assert share_bounds(0, 2).tolist() == [0, 0, 0]


@pytest.mark.parametrize("n", [1, 2, 5, 7])
@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_threads_reduce_uneven_shares(n, threads):
    from nnkit.paper.naive import NaiveRunner
    from nnkit.paper.threads import ThreadsRunner

    sizes = NETS["2 hidden"]
    params, X, labels = problem(sizes, n=n, seed=n)
    cfg = config(sizes, "ce")
    got, _ = ThreadsRunner(params, cfg, threads).gradient(X, labels)
    check_gradient(got, params, X, labels, "ce")
    serial, _ = NaiveRunner(params, cfg).gradient(X, labels)
    # Only the order of the sum over examples differs: a few roundings of the largest term.
    for a, b in zip(got.weights + got.biases, serial.weights + serial.biases, strict=True):
        assert np.allclose(a, b, rtol=0, atol=4 * n * 2 ** -24 * np.abs(b).max() + 1e-12)


# ---------------------------------------------------------------------------------------
# GPU implementations in the CUDA simulator (the kit runs it whenever there is no GPU)


# The GEMM and the loss do not interact: every GEMM once, every loss with two of them.
@pytest.mark.parametrize(("gemm", "loss"), [("host", "ce"), ("host", "mse"), ("naive", "ce"),
                                            ("register", "mse")])
def test_solution_network_matches_the_reference(gemm, loss):
    from nnkit.backend import to_device
    from nnkit.paper import gpu

    sizes = NETS["2 hidden"]
    params, X, labels = problem(sizes)
    runner = gpu.solution_runner(gemm, params, config(sizes, loss))
    Xd, yd = to_device(X), to_device(labels.astype(np.int64))
    acts = runner.forward(runner.weights, runner.biases, Xd, runner.gemm)
    gW, gb, _ = runner.backward(runner.weights, runner.biases, acts, yd, LAM, runner.gemm)
    from nnkit.backend import to_host

    check_gradient(network.Params([to_host(g) for g in gW], [to_host(g) for g in gb]),
                   params, X, labels, loss)
    runner.step(Xd, yd)
    check_step(runner.params(), params, X, labels, loss)


@pytest.mark.parametrize("loss", network.LOSSES)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_pytorch_matches_the_reference(device, loss):
    torch = pytest.importorskip("torch", reason="PyTorch is optional")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    from nnkit.paper.torch_impl import TorchRunner

    sizes = NETS["2 hidden"]
    params, X, labels = problem(sizes)
    runner = TorchRunner(params, config(sizes, loss), device)
    grads, _ = runner.gradient(X, labels)
    check_gradient(grads, params, X, labels, loss)
    runner.step(*runner.epoch_data(X, labels, np.arange(len(labels))))
    check_step(runner.params(), params, X, labels, loss)


# ---------------------------------------------------------------------------------------
# The operation count


def test_operation_count_by_hand():
    # 4-3-2: forward 2(12 + 6), weight gradients 2(12 + 6), the delta below layer 2: 2*6.
    assert flops.per_example([4, 3, 2]) == 36 + 36 + 12
    assert flops.per_step([4, 3, 2]) == 4 * 18 + 2 * 5
    assert flops.per_epoch([4, 3, 2], images=10, batch=4) == 10 * 84 + 3 * 82
