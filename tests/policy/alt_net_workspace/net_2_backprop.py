"""Alternative network that keeps its scratch arrays between calls: the softmax's
probabilities, the back-propagated gradients and a vector of ones live in a module-level
cache keyed by shape, allocated once (what a student does to save allocations per step);
only what the functions return is allocated afresh. The bias gradients come from a GEMM
with the ones vector; the L2 term is folded into the weight-gradient GEMM."""

from nnkit.backend import copy, cuda, empty, zeros

from .net_1_kernels import (
    add_bias,
    bias_sigmoid,
    sgd_update,
    sigmoid_backward,
    softmax_cross_entropy,
)

_cache = {}


def _scratch(tag, shape):
    key = (tag, tuple(shape))
    if key not in _cache:
        _cache[key] = empty(tuple(shape))
    return _cache[key]


@cuda.jit
def ones_kernel(v):
    i = cuda.grid(1)
    if i < v.shape[0]:
        v[i, 0] = 1.0


def _ones(n):
    key = ("ones", n)
    if key not in _cache:
        v = zeros((n, 1))
        ones_kernel[(n + 127) // 128, 128](v)
        _cache[key] = v
    return _cache[key]


def forward(weights, biases, X, gemm):
    outs = [X]
    for k in range(len(weights)):
        Z = empty((X.shape[0], weights[k].shape[0]))
        gemm(outs[k], weights[k], Z, 1.0, 0.0, False, True)
        (add_bias if k == len(weights) - 1 else bias_sigmoid)(Z, biases[k])
        outs.append(Z)
    return outs


def backward(weights, biases, acts, labels, lam, gemm):
    n = acts[0].shape[0]
    P = _scratch("P", acts[-1].shape)
    dZ = _scratch("dZ", acts[-1].shape)
    losses = empty((n,))
    softmax_cross_entropy(acts[-1], labels, P, dZ, losses)
    grads_W, grads_b = [], []
    for k in reversed(range(len(weights))):
        dW = copy(weights[k])
        gemm(dZ, acts[k], dW, 1.0, lam, True, False)
        db = empty((1, weights[k].shape[0]))
        gemm(_ones(n), dZ, db, 1.0, 0.0, True, False)
        grads_W.append(dW)
        grads_b.append(db.reshape(weights[k].shape[0]))
        if k > 0:
            dA = _scratch(f"dA{k}", acts[k].shape)
            gemm(dZ, weights[k], dA, 1.0, 0.0, False, False)
            sigmoid_backward(dA, acts[k])
            dZ = dA
    return grads_W[::-1], grads_b[::-1], losses


def sgd_step(weights, biases, grads_W, grads_b, lr):
    for p, g in zip(weights + biases, grads_W + grads_b, strict=True):
        sgd_update(p, g, lr)
