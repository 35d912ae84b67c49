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
    """[A_0 = X, A_1, ..., A_{L-1}, Z_L]: every layer's output, the last one before softmax."""
    ### BEGIN SOLUTION
    # HINT: Z_l = A_{l-1} W_l^T is one gemm with trans_b=True into a fresh (n, out) array.
    acts = [X]
    last = len(weights) - 1
    for layer, (W, b) in enumerate(zip(weights, biases, strict=True)):
        Z = empty((X.shape[0], W.shape[0]))
        gemm(acts[-1], W, Z, 1.0, 0.0, trans_b=True)
        if layer == last:
            add_bias(Z, b)
        else:
            bias_sigmoid(Z, b)
        acts.append(Z)
    return acts
    ### END SOLUTION


def backward(weights, biases, acts, labels, lam: float, gemm) -> tuple:
    """Gradients of J = mean cross-entropy + 0.5 * lam * sum ||W||^2, from forward()'s acts.

    Returns (grads_W, grads_b, losses): lists shaped like weights and biases, and the
    per-sample cross-entropy (n,) without the L2 term."""
    ### BEGIN SOLUTION
    # HINT: dW_l = dZ_l^T A_{l-1} + lam * W_l is a single gemm: start from a copy of W_l and
    # HINT: use beta = lam. The bias gradient is column_sums(dZ_l). Going down a layer,
    # HINT: dA = dZ_l W_l (another gemm), then sigmoid_backward(dA, A_{l-1}).
    n = acts[0].shape[0]
    logits = acts[-1]
    probs = empty(logits.shape)
    dZ = empty(logits.shape)
    losses = empty((n,))
    softmax_cross_entropy(logits, labels, probs, dZ, losses)  # dZ already carries the 1/n
    grads_W, grads_b = [None] * len(weights), [None] * len(weights)
    for layer in range(len(weights) - 1, -1, -1):
        W, A_prev = weights[layer], acts[layer]
        dW = copy(W)
        gemm(dZ, A_prev, dW, 1.0, lam, trans_a=True)
        db = empty(biases[layer].shape)
        column_sums(dZ, db)
        grads_W[layer], grads_b[layer] = dW, db
        if layer > 0:
            dA = empty(A_prev.shape)
            gemm(dZ, W, dA, 1.0, 0.0)
            sigmoid_backward(dA, A_prev)
            dZ = dA
    return grads_W, grads_b, losses
    ### END SOLUTION


def sgd_step(weights, biases, grads_W, grads_b, lr: float) -> None:
    """Every parameter p <- p - lr * dJ/dp, in place."""
    ### BEGIN SOLUTION
    for P, G in zip(weights + biases, grads_W + grads_b, strict=True):
        sgd_update(P, G, lr)
    ### END SOLUTION
