// Runs nnkit/cuda_src/sgemm_thin.cu on the CPU, for tests on machines without a GPU, as
// emulate_sgemm.cpp does for the tiled kernel: one std::thread per CUDA thread, one block
// at a time, __syncthreads a std::barrier of the block, and __shfl_xor_sync an exchange
// through a warp's slots between two barriers of the warp. It checks indexing, guards,
// the split of K and the shuffle reduction, not speed.
//
//   g++ -std=c++20 -O1 -pthread -I nnkit/cuda_src emulate_thin.cpp
//   ./a.out KERNEL M N K alpha beta sAm sAk sBk sBn sCm sCn offA offB offC nA nB nC chunk in out
// KERNEL is rows, columns or outer; chunk is the share of K per block of columns (the
// launcher's choice; ignored by the others). `in` holds nA + nB + nC float32 (the buffers
// of A, B, C); `out` receives C's whole buffer after the call.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

struct Index {
    unsigned x = 1, y = 1, z = 1;
};
thread_local Index threadIdx;
Index blockIdx, blockDim, gridDim;
std::barrier<>* block_barrier = nullptr;

struct Warp {
    std::unique_ptr<std::barrier<>> bar;
    float slot[32];
};
std::vector<Warp>* warps = nullptr;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
inline void __syncthreads() { block_barrier->arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned, float v, int offset) {
    const unsigned linear = threadIdx.y * blockDim.x + threadIdx.x;
    Warp& w = (*warps)[linear / 32];
    const unsigned lane = linear % 32;
    w.slot[lane] = v;
    w.bar->arrive_and_wait();
    const float got = w.slot[lane ^ offset];
    w.bar->arrive_and_wait();  // nobody overwrites a slot before every lane has read
    return got;
}

#include "sgemm_thin.cu"

// Every block of the grid, one after the other; `body` is the kernel call of one thread.
void launch(Index grid, Index block, const std::function<void()>& body) {
    gridDim = grid, blockDim = block;
    const unsigned threads = block.x * block.y;
    for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx.x = bx, blockIdx.y = by;
            std::barrier<> barrier(threads);
            block_barrier = &barrier;
            std::vector<Warp> team_warps((threads + 31) / 32);
            for (auto& w : team_warps) w.bar = std::make_unique<std::barrier<>>(32);
            warps = &team_warps;
            std::vector<std::thread> team;
            for (unsigned t = 0; t < threads; ++t) {
                team.emplace_back([&, t] {
                    threadIdx.x = t % block.x, threadIdx.y = t / block.x;
                    body();
                });
            }
            for (auto& thread : team) thread.join();
        }
    }
}

int main(int argc, char** argv) {
    using namespace nnkit_thin;
    if (argc != 22) {
        std::fprintf(stderr, "usage: see the top of emulate_thin.cpp\n");
        return 2;
    }
    const char* which = argv[1];
    const int M = std::atoi(argv[2]), N = std::atoi(argv[3]), K = std::atoi(argv[4]);
    const float alpha = std::strtof(argv[5], nullptr), beta = std::strtof(argv[6], nullptr);
    int s[6];
    for (int i = 0; i < 6; ++i) s[i] = std::atoi(argv[7 + i]);
    const long off[3] = {std::atol(argv[13]), std::atol(argv[14]), std::atol(argv[15])};
    const long n[3] = {std::atol(argv[16]), std::atol(argv[17]), std::atol(argv[18])};
    const int chunk = std::atoi(argv[19]);
    std::vector<float> buf[3];
    FILE* in = std::fopen(argv[20], "rb");
    for (int i = 0; i < 3; ++i) {
        buf[i].resize(n[i]);
        if (std::fread(buf[i].data(), sizeof(float), n[i], in) != static_cast<size_t>(n[i]))
            return 3;
    }
    std::fclose(in);
    const float* A = buf[0].data() + off[0];
    const float* B = buf[1].data() + off[1];
    float* C = buf[2].data() + off[2];
    auto up = [](long a, long b) { return static_cast<unsigned>((a + b - 1) / b); };

    if (std::strcmp(which, "rows") == 0) {
        launch({up(M, ROW_WARPS), 1}, {32, ROW_WARPS}, [&] {
            thin_rows(M, N, K, alpha, A, s[0], s[1], B, s[2], s[3], beta, C, s[4], s[5]);
        });
    } else if (std::strcmp(which, "outer") == 0) {
        launch({up(N, OUTER_X), up(M, OUTER_ROWS)}, {OUTER_X, 1}, [&] {
            thin_outer(M, N, K, alpha, A, s[0], s[1], B, s[2], s[3], beta, C, s[4], s[5]);
        });
    } else if (std::strcmp(which, "columns") == 0) {
        const int shares = std::max(1, (K + chunk - 1) / chunk);
        // NaN where no share has written yet: a partial sum never stored would show.
        std::vector<float> work(shares > 1 ? static_cast<size_t>(shares) * M * N : 1, NAN);
        launch({up(N, COL_X), static_cast<unsigned>(shares)}, {COL_X, COL_Y}, [&] {
            thin_columns(M, N, K, alpha, A, s[0], s[1], B, s[2], s[3], beta, C, s[4], s[5],
                         work.data(), chunk);
        });
        if (shares > 1) {
            launch({up(static_cast<long>(M) * N, FINISH_THREADS), 1}, {FINISH_THREADS, 1}, [&] {
                thin_finish(M, N, shares, work.data(), alpha, beta, C, s[4], s[5]);
            });
        }
    } else {
        std::fprintf(stderr, "unknown kernel %s\n", which);
        return 2;
    }
    FILE* out = std::fopen(argv[21], "wb");
    std::fwrite(buf[2].data(), sizeof(float), n[2], out);
    std::fclose(out);
    return 0;
}
