"""Part 2, the network on the GPU: forward pass, backpropagation and the SGD update.

Same network and formulas as the CPU reference (nnkit/network.py): samples are rows,
W_l is (out, in), Z_l = A_{l-1} W_l^T + b_l, sigmoid hidden layers, softmax with
cross-entropy at the output, the L2 term 0.5 * lam * sum ||W_l||^2 on the weights only.

Every matrix product goes through `gemm`, the GEMM you are given (one of your Part 1
kernels, or cuBLAS):

    gemm(A, B, C, alpha=1.0, beta=0.0, trans_a=False, trans_b=False)
        C <- alpha * op(A) @ op(B) + beta * C,   op transposes when asked (no copy)

Allocate device arrays with nnkit.backend.empty(shape) and copy them with
nnkit.backend.copy(array); they work on the GPU and in the simulator alike.
"""

from nnkit.backend import copy, empty

from .net_1_kernels import (
    add_bias,
    bias_sigmoid,
    column_sums,
    sgd_update,
    sigmoid_backward,
    softmax_cross_entropy,
)


def forward(weights, biases, X, gemm) -> list:
    """[A_0 = X, A_1, ..., A_{L-1}, Z_L]: every layer's output, the last one before softmax.

    Check: `make check FUNCTION=forward` (about 10 lines)."""
    # HINT: Z_l = A_{l-1} W_l^T is one gemm with trans_b=True into a fresh (n, out) array.
    raise NotImplementedError("write forward()")


def backward(weights, biases, acts, labels, lam: float, gemm) -> tuple:
    """Gradients of J = mean cross-entropy + 0.5 * lam * sum ||W||^2, from forward()'s acts.

    Returns (grads_W, grads_b, losses): lists shaped like weights and biases, and the
    per-sample cross-entropy (n,) without the L2 term.

    Check: `make check FUNCTION=backward` (about 20 lines)."""
    # HINT: dW_l = dZ_l^T A_{l-1} + lam * W_l is a single gemm: start from a copy of W_l and
    # HINT: use beta = lam. The bias gradient is column_sums(dZ_l). Going down a layer,
    # HINT: dA = dZ_l W_l (another gemm), then sigmoid_backward(dA, A_{l-1}).
    raise NotImplementedError("write backward()")


def sgd_step(weights, biases, grads_W, grads_b, lr: float) -> None:
    """Every parameter p <- p - lr * dJ/dp, in place.

    Check: `make check FUNCTION=sgd_step` (a few lines)."""
    raise NotImplementedError("write sgd_step()")
