"""Alternative network kernels built on warp shuffles: the softmax gives each row one warp
(32 lanes stride over the classes, then shfl_xor_sync butterflies for the maximum and the
sum, so every lane ends with both), and the column sums give each column one warp
(shfl_down_sync tree, lane 0 writes). The elementwise kernels use a 2-D grid."""

import math

import numpy as np

from nnkit.backend import cuda

BLOCK_2D = (32, 4)
FULL_MASK = 0xFFFFFFFF
WARPS_PER_BLOCK = 4


def _grid_2d(rows, cols):
    return ((cols + BLOCK_2D[0] - 1) // BLOCK_2D[0], (rows + BLOCK_2D[1] - 1) // BLOCK_2D[1])


@cuda.jit
def bias_sigmoid_kernel(Z, b):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        Z[r, c] = np.float32(1.0) / (np.float32(1.0) + math.exp(-(Z[r, c] + b[c])))


def bias_sigmoid(Z, b):
    bias_sigmoid_kernel[_grid_2d(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit
def add_bias_kernel(Z, b):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        Z[r, c] = Z[r, c] + b[c]


def add_bias(Z, b):
    add_bias_kernel[_grid_2d(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit
def sigmoid_backward_kernel(dA, A):
    c, r = cuda.grid(2)
    if r < dA.shape[0] and c < dA.shape[1]:
        s = A[r, c]
        dA[r, c] = dA[r, c] * s * (np.float32(1.0) - s)


def sigmoid_backward(dA, A):
    sigmoid_backward_kernel[_grid_2d(*dA.shape), BLOCK_2D](dA, A)


@cuda.jit
def softmax_warp_kernel(Z, labels, P, dZ, losses, inv_n):
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * WARPS_PER_BLOCK + cuda.threadIdx.y
    active = row < Z.shape[0]  # the whole warp takes this branch together
    if active:
        C = Z.shape[1]
        m = -np.float32(math.inf)
        for j in range(lane, C, 32):
            m = max(m, Z[row, j])
        width = 16
        while width > 0:
            m = max(m, cuda.shfl_xor_sync(FULL_MASK, m, width))
            width //= 2
        s = np.float32(0.0)
        for j in range(lane, C, 32):
            s += math.exp(Z[row, j] - m)
        width = 16
        while width > 0:
            s += cuda.shfl_xor_sync(FULL_MASK, s, width)
            width //= 2
        lse = m + math.log(s)
        y = labels[row]
        if lane == 0:
            losses[row] = lse - Z[row, y]
        for j in range(lane, C, 32):
            p = math.exp(Z[row, j] - lse)
            P[row, j] = p
            dZ[row, j] = (p - np.float32(1.0)) * inv_n if j == y else p * inv_n


def softmax_cross_entropy(Z, labels, P, dZ, losses):
    n = Z.shape[0]
    blocks = (n + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK
    softmax_warp_kernel[blocks, (32, WARPS_PER_BLOCK)](Z, labels, P, dZ, losses,
                                                       np.float32(1.0 / n))


@cuda.jit
def column_sums_kernel(X, out, scale):
    lane = cuda.threadIdx.x
    col = cuda.blockIdx.x * WARPS_PER_BLOCK + cuda.threadIdx.y
    if col < X.shape[1]:  # the whole warp takes this branch together
        acc = np.float32(0.0)
        for i in range(lane, X.shape[0], 32):
            acc += X[i, col]
        offset = 16
        while offset > 0:
            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)
            offset //= 2
        if lane == 0:
            out[col] = scale * acc


def column_sums(X, out, scale=1.0):
    blocks = (X.shape[1] + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK
    column_sums_kernel[blocks, (32, WARPS_PER_BLOCK)](X, out, np.float32(scale))


@cuda.jit
def sgd_update_kernel(P, G, lr):
    k = cuda.grid(1)
    if k < P.shape[0]:
        P[k] = P[k] - lr * G[k]


def sgd_update(P, G, lr):
    p, g = P.reshape(P.size), G.reshape(G.size)
    sgd_update_kernel[(P.size + 255) // 256, 256](p, g, np.float32(lr))
