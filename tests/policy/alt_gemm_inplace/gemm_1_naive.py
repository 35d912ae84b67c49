"""Alternative naive GEMM that updates C in place: each thread first replaces C[i, j] by
beta * C[i, j] (or 0 when beta is 0), then adds alpha * A[i, k] * B[k, j] into it, term by
term. alpha and beta are passed as they come (Python floats): numba then computes each
term in float64 before it is stored in float32."""

from nnkit.backend import cuda

BX, BY = 32, 4


@cuda.jit
def naive_in_place(A, B, C, alpha, beta):
    x, y = cuda.grid(2)
    if y < C.shape[0] and x < C.shape[1]:
        if beta == 0.0:
            C[y, x] = 0.0
        else:
            C[y, x] = beta * C[y, x]
        for k in range(A.shape[1]):
            C[y, x] += alpha * A[y, k] * B[k, x]


def gemm_naive(A, B, C, alpha, beta):
    rows, cols = C.shape
    naive_in_place[((cols + BX - 1) // BX, (rows + BY - 1) // BY), (BX, BY)](
        A, B, C, alpha, beta)
