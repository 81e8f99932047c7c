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
//   fp8dsa_indexer_timing target   the Q-resident variants at the target shape only (1. above)
//   fp8dsa_indexer_timing splits   the scorer's key splits (1-4 and auto), N = 8K-128K, H = 64 / 32
//                                  (shapes wide-shared)
//   fp8dsa_indexer_timing fill     the masked fill alone, the scorer alone, the two through
//                                  indexer_logits (the fill first) and the two in the other order,
//                                  T = 4096 causal, H = 64, N = 8K / 32K / 64K / 128K
//   fp8dsa_indexer_timing overhead a CTA's fixed cost: T = 16384, no causal guard, N = 512-8192,
//                                  H = 64 / 32 (the intercept of the time in N)
//   fp8dsa_indexer_timing tail     the last wave cut finer: none, automatic, and a grid of tail
//                                  blocks x parts, T = 4096 causal, N = 8K-128K, H = 64 / 32
//   fp8dsa_indexer_timing shapes [NAME]  the Q-resident shapes (wide / narrow shared) x key splits,
//                                  T = 4096 causal, N = 8K-128K, H = 64 / 32
//   fp8dsa_indexer_timing profile H N [splits]
//                                  three launches of the shipped scorer at T = 4096 causal (for ncu:
//                                  --launch-skip 2 --launch-count 1), then its median time
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "tools/device_random.h"
#include "fp8dsa/indexer.h"
#include "indexer/key_splits.h"
#include "indexer/scorers.h"
#include "tools/timing.h"
#include "tool_support.h"

namespace fp8dsa {
namespace {

constexpr double kGemmTflops = 1439.0;

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
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&b.q, kMaxT * kMaxH * kD));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&b.k, kMaxN * kD));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&b.w, kMaxT * kMaxH * sizeof(float)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&b.k_scale, kMaxN * sizeof(float)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&b.logits, kMaxT * kMaxN * sizeof(float)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&b.ks, kMaxT * sizeof(int32_t)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&b.ke, kMaxT * sizeof(int32_t)));
  FP8DSA_TOOL_CHECK_OK(tools::fill_random_e4m3(b.q, kMaxT * kMaxH * kD, 1, 2.0f, nullptr));
  FP8DSA_TOOL_CHECK_OK(tools::fill_random_e4m3(b.k, kMaxN * kD, 2, 2.0f, nullptr));
  FP8DSA_TOOL_CHECK_OK(tools::fill_random_uniform(b.w, kMaxT * kMaxH, 3, -1.0f, 1.0f, nullptr));
  FP8DSA_TOOL_CHECK_OK(tools::fill_random_uniform(b.k_scale, kMaxN, 4, 0.5f, 1.5f, nullptr));
  FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
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
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(b.ks, ks.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(b.ke, ke.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
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

// Median milliseconds of `launch`: one probe launch, then 10 timed launches after one warm-up (3
// when the probe took over 200 ms), with the benchmark's timing loop.
template <class Launch>
double time_ms(Launch&& launch) {
  const auto run = [&](int warmup, int reps) {
    tools::TimingConfig config;
    config.warmup = warmup;
    config.reps = reps;
    tools::Timing timing;
    FP8DSA_TOOL_CHECK_OK(tools::time_launches(nullptr, 1, config, [&](int) { return launch(); }, &timing));
    return timing.median_ms;
  };
  const double probe = run(0, 1);
  return run(1, probe > 200.0 ? 3 : 10);
}

double tflops(double pairs, int H, double ms) { return 2.0 * H * kD * pairs / (ms * 1e-3) / 1e12; }

void target_shape(const Buffers& b) {
  std::printf("== target shape T=4096 N=65536 causal H=64 D=128 ==\n");
  bool causal = false;
  const double pairs = set_bounds(b, 4096, 65536, &causal);
  const IndexerParams p = params_for(b, 4096, 65536, 64);
  using detail::indexer::QResidentShape;
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
    detail::indexer::QResidentTuning tuning;
    tuning.shape = v.shape;
    tuning.key_splits = v.splits;
    tuning.ping_pong = v.ping_pong;
    tuning.mma_only = v.mma_only;
    const double ms = time_ms([&] { return detail::indexer::run_q_resident(p, tuning); });
    std::printf("q_res %-24s %8.3f ms %7.1f TFLOPS  gemm %.3f\n", v.name, ms, tflops(pairs, 64, ms),
                tflops(pairs, 64, ms) / kGemmTflops);
  }
  const double ms = time_ms([&] { return detail::indexer::run_k_resident(p); });
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
        const double q_ms = time_ms([&] { return detail::indexer::run_q_resident(p); });
        const double k_ms = time_ms([&] { return detail::indexer::run_k_resident(p); });
        std::printf("%6lld %7lld %3d %6s %10.1f %10.1f %8.1f %8.1f %s\n", static_cast<long long>(T),
                    static_cast<long long>(N), H, causal ? "causal" : "full", q_ms * 1e3, k_ms * 1e3,
                    tflops(pairs, H, q_ms), tflops(pairs, H, k_ms), q_ms <= k_ms ? "q_res" : "k_res");
      }
    }
  }
}

// Where the fill's time goes, T = 4096 causal, H = 64 and 32: fill_masked_cells alone (its bytes:
// the cells outside [ks, ke)), the scorer alone, indexer_logits with fill_masked (the scorer, then
// the fill as its programmatic dependent, overlapped with the scorer's last CTAs) and the scorer
// followed by a plain launch of the fill (no overlap).
void fill_rows(const Buffers& b) {
  using detail::indexer::FillLaunch;
  std::printf("== masked fill: T=4096 causal ==\n");
  std::printf("%3s %7s %10s %8s %10s %10s %12s %12s %12s\n", "H", "N", "fill_us", "GB/s", "scorer_us", "overlap_us",
              "overlap-sc", "serial_us", "serial-sc");
  for (int H : {64, 32}) {
    for (int64_t N : {8192, 32768, 65536, 131072}) {
      bool causal = false;
      const double pairs = set_bounds(b, 4096, N, &causal);
      IndexerParams p = params_for(b, 4096, N, H);
      p.fill_masked = true;
      const double masked_bytes = (4096.0 * static_cast<double>(N) - pairs) * sizeof(float);
      const double fill = time_ms([&] { return detail::indexer::fill_masked_cells(p, FillLaunch::kSerial); });
      const double scorer = time_ms([&] { return detail::indexer::run_q_resident(p); });
      const double overlap = time_ms([&] { return indexer_logits(p); });
      const double serial = time_ms([&] {
        const Status s = detail::indexer::run_q_resident(p);
        return s.is_ok() ? detail::indexer::fill_masked_cells(p, FillLaunch::kSerial) : s;
      });
      std::printf("%3d %7lld %10.1f %8.0f %10.1f %10.1f %12.1f %12.1f %12.1f\n", H, static_cast<long long>(N),
                  fill * 1e3, masked_bytes / (fill * 1e-3) / 1e9, scorer * 1e3, overlap * 1e3,
                  (overlap - scorer) * 1e3, serial * 1e3, (serial - scorer) * 1e3);
      std::fflush(stdout);
    }
  }
}

// A CTA's fixed cost: every token sees all N keys (T = 16384 > N, so no causal guard), N = 512 to
// 8192, H = 64 and 32, so that every CTA has the same N / 64 key tiles; the time's intercept in N
// over the waves is what a CTA costs beyond its tiles.
void overhead_rows(const Buffers& b) {
  std::printf("== CTA fixed cost: T=16384, every token sees all N keys ==\n");
  std::printf("%3s %7s %10s %8s\n", "H", "N", "us", "TFLOPS");
  for (int H : {64, 32}) {
    for (int64_t N : {512, 1024, 2048, 4096, 8192}) {
      bool causal = false;
      const double pairs = set_bounds(b, 16384, N, &causal);
      const IndexerParams p = params_for(b, 16384, N, H);
      const double ms = time_ms([&] { return detail::indexer::run_q_resident(p); });
      std::printf("%3d %7lld %10.1f %8.1f\n", H, static_cast<long long>(N), ms * 1e3, tflops(pairs, H, ms));
      std::fflush(stdout);
    }
  }
}

// The shapes at T = 4096 causal: wide-shared (the shipped H >= 32 shape, also without the MMA
// ping-pong) and narrow-shared (three consumers of 128 columns), each with key splits auto
// (choose_key_splits) and 1-4; `only` names one of them. False (and nothing timed) when `only`
// names none.
bool shape_rows(const Buffers& b, const char* only) {
  using detail::indexer::QResidentShape;
  struct Shape {
    const char* name;
    QResidentShape shape;
    bool ping_pong;
  };
  const Shape shapes[] = {{"wide-shared", QResidentShape::kWideShared, true},
                          {"narrow-shared", QResidentShape::kNarrowShared, true},
                          {"wide-shared no-pp", QResidentShape::kWideShared, false}};
  if (only != nullptr &&
      std::none_of(std::begin(shapes), std::end(shapes), [&](const Shape& sh) { return std::strcmp(only, sh.name) == 0; })) {
    std::fprintf(stderr, "shapes: unknown shape \"%s\" (wide-shared, narrow-shared, \"wide-shared no-pp\")\n", only);
    return false;
  }
  std::printf("== shapes: T=4096 causal, D=128 (ms) ==\n");
  std::printf("%6s %3s %-16s %8s %8s %8s %8s %8s\n", "N", "H", "shape", "auto", "sp=1", "sp=2", "sp=3", "sp=4");
  for (int H : {64, 32}) {
    for (int64_t N : {8192, 16384, 32768, 65536, 131072}) {
      bool causal = false;
      set_bounds(b, 4096, N, &causal);
      const IndexerParams p = params_for(b, 4096, N, H);
      for (const Shape& sh : shapes) {
        if (only != nullptr && std::strcmp(only, sh.name) != 0) continue;
        std::printf("%6lld %3d %-16s", static_cast<long long>(N), H, sh.name);
        for (int splits : {0, 1, 2, 3, 4}) {
          detail::indexer::QResidentTuning tuning;
          tuning.shape = sh.shape;
          tuning.key_splits = splits;
          tuning.ping_pong = sh.ping_pong;
          if (!detail::indexer::run_q_resident(p, tuning).is_ok()) {
            std::printf(" %8s", "-");
            continue;
          }
          std::printf(" %8.4f", time_ms([&] { return detail::indexer::run_q_resident(p, tuning); }));
          std::fflush(stdout);
        }
        std::printf("\n");
      }
    }
  }
  return true;
}

// The last wave cut finer (key_splits.h choose_tail_splits): per shape, the grid without a tail,
// the automatic tail, other key splits (H = 32) and a grid of tail cuts, two rounds in turn.
void tail_rows(const Buffers& b) {
  for (const int H : {64, 32}) {
    for (const int64_t N : {int64_t{8192}, int64_t{32768}, int64_t{65536}, int64_t{131072}}) {
      bool causal = false;
      const double pairs = set_bounds(b, 4096, N, &causal);
      const IndexerParams p = params_for(b, 4096, N, H);
      const int64_t blocks = 4096 / detail::indexer::q_resident_auto_block_tokens(H);
      const int splits = detail::indexer::choose_key_splits(blocks, N);
      const int partial_blocks = static_cast<int>(detail::indexer::partial_wave_blocks(blocks, splits, device_sm_count()));
      struct Variant {
        int key_splits, tail_blocks, tail_splits;
      };
      std::vector<Variant> variants = {{0, 0, 0}, {0, -1, 0}};
      if (H == 32) variants.insert(variants.end(), {{1, 0, 0}, {2, 0, 0}, {4, 0, 0}, {1, -1, 0}, {2, -1, 0}, {4, -1, 0}});
      if (H == 64) variants.push_back({2, -1, 0});
      for (const int f : {2, 3, 4, 6, 9, 12}) variants.push_back({0, partial_blocks, splits * f});
      for (const int f : {3, 6}) variants.push_back({0, 2 * partial_blocks, splits * f});
      const auto auto_tail = detail::indexer::choose_tail_splits(blocks, splits, N, H, false);
      const auto auto_fill_tail = detail::indexer::choose_tail_splits(blocks, splits, N, H, true);
      std::printf("tail N=%lld H=%d: %lld blocks, %d splits, partial-wave blocks %d, auto tail %d x %d (with the fill %d x %d)\n",
                  static_cast<long long>(N), H, static_cast<long long>(blocks), splits, partial_blocks, auto_tail.blocks,
                  auto_tail.splits, auto_fill_tail.blocks, auto_fill_tail.splits);
      for (int round = 0; round < 2; ++round) {
        for (const Variant& v : variants) {
          detail::indexer::QResidentTuning tuning;
          tuning.key_splits = v.key_splits;
          tuning.tail_blocks = v.tail_blocks;
          tuning.tail_splits = v.tail_splits;
          const double ms = time_ms([&] { return detail::indexer::run_q_resident(p, tuning); });
          std::printf("  round %d splits %d tail %d x %d: %.4f ms %.1f TFLOPS\n", round, v.key_splits, v.tail_blocks,
                      v.tail_splits, ms, tflops(pairs, H, ms));
        }
        // With the masked fill after the scorer (what indexer_logits runs), by key splits, and with
        // the tail the plain launch would cut (the fill beside the scorer's end, or after it).
        using detail::indexer::FillLaunch;
        struct FillVariant {
          int key_splits;
          bool tail;
          FillLaunch launch;
        };
        for (const FillVariant& f : {FillVariant{0, false, FillLaunch::kAfterScorer}, FillVariant{1, false, FillLaunch::kAfterScorer},
                                     FillVariant{2, false, FillLaunch::kAfterScorer}, FillVariant{0, false, FillLaunch::kSerial},
                                     FillVariant{0, true, FillLaunch::kAfterScorer}, FillVariant{0, true, FillLaunch::kSerial}}) {
          IndexerParams pf = p;
          pf.fill_masked = true;
          detail::indexer::QResidentTuning tuning;
          tuning.key_splits = f.key_splits;
          if (f.tail) {
            tuning.tail_blocks = auto_tail.blocks;
            tuning.tail_splits = auto_tail.splits;
          }
          const double ms = time_ms([&]() -> Status {
            FP8DSA_RETURN_IF_ERROR(detail::indexer::run_q_resident(pf, tuning));
            return detail::indexer::fill_masked_cells(pf, f.launch);
          });
          std::printf("  round %d fill %s, splits %d, tail %d x %d: %.4f ms %.1f TFLOPS\n", round,
                      f.launch == FillLaunch::kSerial ? "serial" : "beside", f.key_splits, tuning.tail_blocks,
                      tuning.tail_splits, ms, tflops(pairs, H, ms));
        }
        IndexerParams shipped = p;
        shipped.fill_masked = true;
        const double ms = time_ms([&] { return indexer_logits(shipped); });
        std::printf("  round %d fill shipped (indexer_logits): %.4f ms %.1f TFLOPS\n", round, ms, tflops(pairs, H, ms));
      }
    }
  }
}

// Three launches of the shipped scorer (auto shape; key splits auto or given) for a profiler to pick
// the last of, then the median time.
void profile_shape(const Buffers& b, int H, int64_t N, int splits) {
  bool causal = false;
  const double pairs = set_bounds(b, 4096, N, &causal);
  const IndexerParams p = params_for(b, 4096, N, H);
  detail::indexer::QResidentTuning tuning;
  tuning.key_splits = splits;
  for (int i = 0; i < 3; ++i) FP8DSA_TOOL_CHECK_OK(detail::indexer::run_q_resident(p, tuning));
  FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
  const double ms = time_ms([&] { return detail::indexer::run_q_resident(p, tuning); });
  std::printf("profile T=4096 N=%lld H=%d splits=%d: %.4f ms %.1f TFLOPS\n", static_cast<long long>(N), H, splits, ms,
              tflops(pairs, H, ms));
}

}  // namespace
}  // namespace fp8dsa

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "quick") == 0;
  int profile_heads = 0, profile_splits = 0;
  long long profile_keys = 0;
  if (argc > 1 && std::strcmp(argv[1], "profile") == 0) {
    // The buffers hold N <= kMaxN keys and H <= kMaxH heads; the library checks H itself.
    if (argc > 3) {
      profile_heads = std::atoi(argv[2]);
      profile_keys = std::atoll(argv[3]);
      profile_splits = argc > 4 ? std::atoi(argv[4]) : 0;
    }
    if (argc < 4 || profile_heads < 1 || profile_heads > fp8dsa::kMaxH || profile_keys < 1 ||
        profile_keys > fp8dsa::kMaxN || profile_splits < 0) {
      std::fprintf(stderr, "usage: fp8dsa_indexer_timing profile H N [splits]: 1 <= H <= %lld, 1 <= N <= %lld, splits >= 0 "
                           "(0: automatic)\n", static_cast<long long>(fp8dsa::kMaxH), static_cast<long long>(fp8dsa::kMaxN));
      return 2;
    }
  }
  const fp8dsa::Buffers b = fp8dsa::allocate();
  if (argc > 1 && std::strcmp(argv[1], "splits") == 0) {
    fp8dsa::shape_rows(b, "wide-shared");
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "fill") == 0) {
    fp8dsa::fill_rows(b);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "tail") == 0) {
    fp8dsa::tail_rows(b);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "overhead") == 0) {
    fp8dsa::overhead_rows(b);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "shapes") == 0) return fp8dsa::shape_rows(b, argc > 2 ? argv[2] : nullptr) ? 0 : 2;
  if (argc > 1 && std::strcmp(argv[1], "profile") == 0) {
    fp8dsa::profile_shape(b, profile_heads, profile_keys, profile_splits);
    return 0;
  }
  fp8dsa::target_shape(b);
  if (argc > 1 && std::strcmp(argv[1], "target") == 0) return 0;
  fp8dsa::bench_rows(b);
  fp8dsa::router_grid(b, quick);
  return 0;
}
