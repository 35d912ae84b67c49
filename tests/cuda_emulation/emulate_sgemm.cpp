// Runs nnkit/cuda_src/sgemm_warptile.cu on the CPU, for tests on machines without a GPU:
// compiled as C++20 with the CUDA keywords defined away, one std::thread per CUDA thread,
// one block at a time, __shared__ arrays as static locals (shared by the block's threads)
// and __syncthreads as a std::barrier. It checks the kernel's indexing, guards and
// double-buffering logic, not its speed (nor what a real GPU does with a race).
//
//   g++ -std=c++20 -O1 -pthread -DCFG=128,128,16,64,32,2,2 -I nnkit/cuda_src emulate_sgemm.cpp
//   ./a.out M N K alpha beta sAm sAk sBk sBn sCm sCn vec offA offB offC nA nB nC in out
// `in` holds nA + nB + nC float32 (the buffers of A, B, C); the operands start at the
// offsets given (in elements); `out` receives C's whole buffer after the call.
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

struct alignas(16) float4 {
    float x, y, z, w;
};
struct Index {
    unsigned x = 0, y = 0, z = 0;
};
thread_local Index threadIdx;
Index blockIdx;
std::barrier<>* block_barrier = nullptr;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
inline void __syncthreads() { block_barrier->arrive_and_wait(); }

#include "sgemm_warptile.cu"

#define KERNEL nnkit::sgemm_warptile<CFG>
template <int BM, int BN, int...>
constexpr int rows_of() { return BM; }
template <int BM, int BN, int...>
constexpr int cols_of() { return BN; }

int main(int argc, char** argv) {
    if (argc != 21) {
        std::fprintf(stderr, "usage: see the top of emulate_sgemm.cpp\n");
        return 2;
    }
    const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
    const float alpha = std::strtof(argv[4], nullptr), beta = std::strtof(argv[5], nullptr);
    int s[6];
    for (int i = 0; i < 6; ++i) s[i] = std::atoi(argv[6 + i]);
    const int vec = std::atoi(argv[12]);
    const long off[3] = {std::atol(argv[13]), std::atol(argv[14]), std::atol(argv[15])};
    const long n[3] = {std::atol(argv[16]), std::atol(argv[17]), std::atol(argv[18])};
    // Separate 16-byte-aligned buffers, as cudaMalloc's are.
    std::vector<float4> store[3];
    float* buf[3];
    FILE* in = std::fopen(argv[19], "rb");
    for (int i = 0; i < 3; ++i) {
        store[i].resize((n[i] + 3) / 4 + 1);
        buf[i] = &store[i][0].x;
        if (std::fread(buf[i], sizeof(float), n[i], in) != static_cast<size_t>(n[i])) return 3;
    }
    std::fclose(in);

    constexpr int BM = rows_of<CFG>(), BN = cols_of<CFG>();
    constexpr int threads = nnkit::Tiles<CFG>::THREADS;
    for (unsigned by = 0; by < static_cast<unsigned>((M + BM - 1) / BM); ++by) {
        for (unsigned bx = 0; bx < static_cast<unsigned>((N + BN - 1) / BN); ++bx) {
            blockIdx.x = bx, blockIdx.y = by;
            std::barrier<> barrier(threads);
            block_barrier = &barrier;
            std::vector<std::thread> team;
            for (int t = 0; t < threads; ++t) {
                team.emplace_back([&, t] {
                    threadIdx.x = t;
                    KERNEL(M, N, K, alpha, buf[0] + off[0], s[0], s[1], buf[1] + off[1], s[2],
                           s[3], beta, buf[2] + off[2], s[4], s[5], vec);
                });
            }
            for (auto& th : team) th.join();
        }
    }
    FILE* out = std::fopen(argv[20], "wb");
    std::fwrite(buf[2], sizeof(float), n[2], out);
    std::fclose(out);
    return 0;
}
