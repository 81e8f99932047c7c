// Timing driver for the indexer scorers (not a test: run by hand on an H200). Prints
//   1. the Q-resident variants at the target shape (T = 4096, N = 65536 causal, H = 64, D = 128),
//   2. the benchmark rows (T = 4096 causal, N in {8K, 32K, 64K, 128K}, H in {64, 32}),
//   3. the router grid: Q-resident vs K-resident over T x N x H (causal when T <= N, else every
//      token sees all N keys), and which one wins.
// Each time is the median of >= 10 launches timed with CUDA events (3 when one launch exceeds
// 200 ms). TFLOPS count valid (token, key) pairs only, 2 * H * D flops each. "gemm" is the ratio
// to 1439 TFLOPS, the cuBLASLt FP8 GEMM measured on this H200 (KERNELS.md); the lead's benchmark
// measures that yardstick in the same run.
//
//   fp8dsa_indexer_timing [quick]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "fp8dsa/indexer.h"
#include "indexer/scorers.h"

namespace fp8dsa {
namespace {

constexpr double kGemmTflops = 1439.0;

#define CHECK_CUDA(expr)                                                                  \
  do {                                                                                    \
    const cudaError_t err_ = (expr);                                                      \
    if (err_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__device__ uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void fill_e4m3(uint8_t* out, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float u = (mix(seed * 0x9E3779B97F4A7C15ULL + i) >> 8) * (1.0f / 16777216.0f);
    out[i] = __nv_fp8_e4m3(4.0f * u - 2.0f).__x;
  }
}

__global__ void fill_f32(float* out, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float u = (mix(seed * 0x9E3779B97F4A7C15ULL + i) >> 8) * (1.0f / 16777216.0f);
    out[i] = lo + (hi - lo) * u;
  }
}

struct Buffers {
  uint8_t* q = nullptr;
  uint8_t* k = nullptr;
  float* w = nullptr;
  float* k_scale = nullptr;
  float* logits = nullptr;
  int32_t* ks = nullptr;
  int32_t* ke = nullptr;
};

constexpr int64_t kMaxT = 16384, kMaxN = 131072, kMaxH = 64, kD = 128;

Buffers allocate() {
  Buffers b;
  CHECK_CUDA(cudaMalloc(&b.q, kMaxT * kMaxH * kD));
  CHECK_CUDA(cudaMalloc(&b.k, kMaxN * kD));
  CHECK_CUDA(cudaMalloc(&b.w, kMaxT * kMaxH * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&b.k_scale, kMaxN * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&b.logits, kMaxT * kMaxN * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&b.ks, kMaxT * sizeof(int32_t)));
  CHECK_CUDA(cudaMalloc(&b.ke, kMaxT * sizeof(int32_t)));
  fill_e4m3<<<1024, 256>>>(b.q, kMaxT * kMaxH * kD, 1);
  fill_e4m3<<<1024, 256>>>(b.k, kMaxN * kD, 2);
  fill_f32<<<1024, 256>>>(b.w, kMaxT * kMaxH, 3, -1.0f, 1.0f);
  fill_f32<<<1024, 256>>>(b.k_scale, kMaxN, 4, 0.5f, 1.5f);
  CHECK_CUDA(cudaDeviceSynchronize());
  return b;
}

// Causal (T new tokens over N - T cached keys) when T <= N, else every token sees all N keys.
// Uploads the bounds and returns the number of valid pairs.
double set_bounds(const Buffers& b, int64_t T, int64_t N, bool* causal) {
  std::vector<int32_t> ks(T, 0), ke(T);
  *causal = T <= N;
  double pairs = 0;
  for (int64_t t = 0; t < T; ++t) {
    ke[t] = static_cast<int32_t>(*causal ? N - T + t + 1 : N);
    pairs += ke[t] - ks[t];
  }
  CHECK_CUDA(cudaMemcpy(b.ks, ks.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b.ke, ke.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
  return pairs;
}

IndexerParams params_for(const Buffers& b, int64_t T, int64_t N, int H) {
  IndexerParams p;
  p.num_tokens = T;
  p.num_keys = N;
  p.num_heads = H;
  p.head_dim = kD;
  p.q = b.q;
  p.w = b.w;
  p.k = b.k;
  p.k_scale = b.k_scale;
  p.ks = b.ks;
  p.ke = b.ke;
  p.logits = b.logits;
  return p.resolved();
}

// Median milliseconds of `launch` (returns false on a failed launch).
template <class Launch>
double time_ms(Launch&& launch) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  auto one = [&]() {
    CHECK_CUDA(cudaEventRecord(start));
    const Status st = launch();
    if (!st.is_ok()) {
      std::fprintf(stderr, "launch failed: %s\n", st.to_string().c_str());
      std::exit(1);
    }
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms);
  };
  const double first = one();
  one();
  const int reps = first > 200.0 ? 3 : 10;
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) times.push_back(one());
  std::sort(times.begin(), times.end());
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return times[times.size() / 2];
}

double tflops(double pairs, int H, double ms) { return 2.0 * H * kD * pairs / (ms * 1e-3) / 1e12; }

void target_shape(const Buffers& b) {
  std::printf("== target shape T=4096 N=65536 causal H=64 D=128 ==\n");
  bool causal = false;
  const double pairs = set_bounds(b, 4096, 65536, &causal);
  const IndexerParams p = params_for(b, 4096, 65536, 64);
  using indexer_detail::QResidentShape;
  struct Variant {
    const char* name;
    QResidentShape shape;
    int splits;
    bool ping_pong;
    bool mma_only;
  };
  const Variant variants[] = {
      {"wide-shared auto", QResidentShape::kWideShared, 0, true, false},
      {"wide-shared auto no-pp", QResidentShape::kWideShared, 0, false, false},
      {"wide-shared sp=1", QResidentShape::kWideShared, 1, true, false},
      {"wide-shared sp=4", QResidentShape::kWideShared, 4, true, false},
      {"narrow-shared auto", QResidentShape::kNarrowShared, 0, true, false},
      {"wide auto", QResidentShape::kWide, 0, true, false},
      {"narrow auto", QResidentShape::kNarrow, 0, true, false},
      {"MMA only wide-shared", QResidentShape::kWideShared, 0, true, true},
      {"MMA only narrow-shared", QResidentShape::kNarrowShared, 0, true, true},
  };
  for (const Variant& v : variants) {
    indexer_detail::QResidentTuning tuning;
    tuning.shape = v.shape;
    tuning.key_splits = v.splits;
    tuning.ping_pong = v.ping_pong;
    tuning.mma_only = v.mma_only;
    const double ms = time_ms([&] { return indexer_detail::run_q_resident(p, tuning); });
    std::printf("q_res %-24s %8.3f ms %7.1f TFLOPS  gemm %.3f\n", v.name, ms, tflops(pairs, 64, ms),
                tflops(pairs, 64, ms) / kGemmTflops);
  }
  const double ms = time_ms([&] { return indexer_detail::run_k_resident(p); });
  std::printf("%-26s %8.3f ms %7.1f TFLOPS\n", "k_res", ms, tflops(pairs, 64, ms));
}

void bench_rows(const Buffers& b) {
  std::printf("== bench rows: T=4096 causal, D=128, kernel = kAuto ==\n");
  std::printf("%6s %3s %10s %9s %6s %s\n", "N", "H", "ms", "TFLOPS", "gemm", "kernel");
  for (int H : {64, 32}) {
    for (int64_t N : {8192, 32768, 65536, 131072}) {
      bool causal = false;
      const double pairs = set_bounds(b, 4096, N, &causal);
      const IndexerParams p = params_for(b, 4096, N, H);
      const double ms = time_ms([&] { return indexer_logits(p); });
      std::printf("%6lld %3d %10.3f %9.1f %6.3f %s\n", static_cast<long long>(N), H, ms, tflops(pairs, H, ms),
                  tflops(pairs, H, ms) / kGemmTflops, indexer_kernel_name(indexer_route(p)));
    }
  }
}

void router_grid(const Buffers& b, bool quick) {
  std::printf("== router grid (us; causal when T <= N, else full) ==\n");
  std::printf("%6s %7s %3s %6s %10s %10s %8s %8s %s\n", "T", "N", "H", "bounds", "q_res_us", "k_res_us",
              "q_TF", "k_TF", "winner");
  const std::vector<int64_t> ts = quick ? std::vector<int64_t>{1, 16, 256, 4096}
                                        : std::vector<int64_t>{1, 4, 16, 64, 256, 1024, 4096, 16384};
  for (int H : {8, 32, 64}) {
    for (int64_t N : {4096, 32768, 131072}) {
      for (int64_t T : ts) {
        bool causal = false;
        const double pairs = set_bounds(b, T, N, &causal);
        IndexerParams p = params_for(b, T, N, H);
        const double q_ms = time_ms([&] { return indexer_detail::run_q_resident(p); });
        const double k_ms = time_ms([&] { return indexer_detail::run_k_resident(p); });
        std::printf("%6lld %7lld %3d %6s %10.1f %10.1f %8.1f %8.1f %s\n", static_cast<long long>(T),
                    static_cast<long long>(N), H, causal ? "causal" : "full", q_ms * 1e3, k_ms * 1e3,
                    tflops(pairs, H, q_ms), tflops(pairs, H, k_ms), q_ms <= k_ms ? "q_res" : "k_res");
      }
    }
  }
}

}  // namespace
}  // namespace fp8dsa

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "quick") == 0;
  const fp8dsa::Buffers b = fp8dsa::allocate();
  fp8dsa::target_shape(b);
  fp8dsa::bench_rows(b);
  fp8dsa::router_grid(b, quick);
  return 0;
}
