// Tuning driver for the FP8 sparse MLA kernels (not a test, not the official benchmark): times every
// instantiated variant at T = 4096, topk = 2048 on the realistic inputs of tools/mla_workload.h (score
// std 3) with CUDA events (median of reps), beside a cuBLASLt FP8 GEMM of 8192^3 from the same run.
//   fp8dsa_sparse_mla_timing [reps=20] [N=32768]     the table
//   fp8dsa_sparse_mla_timing tail [reps=20]         the 64-head kernel's last wave: never split, the
//                                                    planner's choice and forced parts, over T
//   fp8dsa_sparse_mla_timing overhead [reps=20]     each kernel with every token's list cut to L
//                                                    keys (topk_length): time against tiles a CTA,
//                                                    whose intercept is the cost an item pays whatever
//                                                    its length (setup, pipeline fill and drain)
//   fp8dsa_sparse_mla_timing phases                 where a seesaw CTA's time goes (a build with
//                                                    FP8DSA_MLA_PHASE_PROBE=ON: phase_probe.cuh)
//   fp8dsa_sparse_mla_timing phases v32             the same for the V3.2-row kernel
//   fp8dsa_sparse_mla_timing profile H [chains] [transposed|padded]
//                                                    one launch at N = 32768 (for ncu), nothing else
//   fp8dsa_sparse_mla_timing profile v32 [H=128] [q_terms=2]
//                                                    the same for the V3.2-row kernel
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fp8dsa/sparse_mla.h"
#include "gemm_yardstick.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/phase_probe.cuh"
#include "tools/timing.h"
#include "tool_support.h"
#include "tools/mla_workload.h"
#include "tools/v32_rows.h"

namespace {

using fp8dsa::detail::sparse_mla::Fp8Tuning;
using fp8dsa::detail::sparse_mla::SmallHeads;

double median_ms(const fp8dsa::SparseMlaParams& p, int reps, const Fp8Tuning& tuning) {
  const auto launch = [&](int) { return fp8dsa::detail::sparse_mla::launch_sparse_mla_fp8(p, tuning); };
  fp8dsa::tools::TimingConfig config;
  config.reps = reps;
  fp8dsa::tools::Timing timing;
  FP8DSA_TOOL_CHECK_OK(fp8dsa::tools::time_launches(nullptr, 1, config, launch, &timing));
  return timing.median_ms;
}

#if defined(FP8DSA_MLA_PHASE_PROBE)
// Prints group `group`'s mean cycles of each named step (phase_probe.cuh: the pair-step sums of the
// first `ctas` CTAs, over `per` loop iterations a CTA) and their total; `semicolons` ends each step
// with one (step names with spaces), else only the total is set off.
void print_step_means(const std::vector<uint32_t>& steps, size_t ctas, int group, const char* const* names,
                      int count, double per, bool semicolons) {
  using fp8dsa::detail::sparse_mla::kNumPairSteps;
  double total = 0;
  for (int k = 0; k < count; ++k) {
    double sum = 0;
    for (size_t i = 0; i < ctas; ++i) sum += steps[(i * 2 + group) * kNumPairSteps + k];
    sum /= static_cast<double>(ctas) * per;
    total += sum;
    std::printf(" %s %.0f%s", names[k], sum, semicolons ? ";" : "");
  }
  std::printf("%s total %.0f\n", semicolons ? "" : ";", total);
}

// A probed launch of p (the whole kernel, no tail split), three times so that the probe holds the
// last; returns the CTAs the probe recorded (its first kPhaseProbeCtas) for T tokens at h heads.
size_t run_probed(const fp8dsa::SparseMlaParams& p, int64_t tokens, int h) {
  fp8dsa::detail::sparse_mla::Fp8Tuning tuning;
  tuning.tail_parts = 1;
  for (int run = 0; run < 3; ++run) FP8DSA_TOOL_CHECK_OK(fp8dsa::detail::sparse_mla::launch_sparse_mla_fp8(p, tuning));
  FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
  return static_cast<size_t>(std::min<int64_t>(fp8dsa::detail::sparse_mla::kPhaseProbeCtas, tokens * (h / 64)));
}

// Microseconds a cycle at the device's nominal clock (the SM's own runs lower under load), and that
// clock in kHz.
double nominal_us_per_cycle(int* clock_khz) {
  FP8DSA_TOOL_CHECK_CUDA(cudaDeviceGetAttribute(clock_khz, cudaDevAttrClockRate, 0));
  return 1e3 / *clock_khz;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const bool profile = argc > 1 && std::strcmp(argv[1], "profile") == 0;
  const bool tail = argc > 1 && std::strcmp(argv[1], "tail") == 0;
  const bool overhead = argc > 1 && std::strcmp(argv[1], "overhead") == 0;
  const bool phases = argc > 1 && std::strcmp(argv[1], "phases") == 0;
  const int reps_arg = tail || overhead ? 2 : 1;  // "tail [reps]", "overhead [reps]" or "[reps] [N]"
  const int reps = !profile && !phases && argc > reps_arg ? std::max(5, std::atoi(argv[reps_arg])) : 20;
  const int64_t n = !profile && !tail && !overhead && !phases && argc > 2 ? std::atoll(argv[2]) : 32768;
  const int64_t T = 4096;
  const int topk = 2048, max_h = 128, d_qk = 576, d_v = 512;

  // One workload at h = 128; smaller h take its first heads (q_token_stride stays 128 rows).
  fp8dsa::tools::MlaWorkloadSpec spec;
  spec.num_tokens = T;
  spec.num_kv = n;
  spec.num_heads = max_h;
  spec.topk = topk;
  const fp8dsa::tools::MlaWorkload w = fp8dsa::tools::make_mla_workload(spec);
  std::printf("inputs: T=%lld N=%lld topk=%d, %s\n", (long long)T, (long long)n, topk, w.describe().c_str());
  uint8_t *d_q, *d_kv;
  int32_t* d_idx;
  void* d_out;
  float *d_lse, *d_max;
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_q, w.q.size()));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_kv, w.kv.size()));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_idx, w.indices.size() * sizeof(int32_t)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_out, T * max_h * d_v * 2));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_lse, T * max_h * sizeof(float)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_max, T * max_h * sizeof(float)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_q, w.q.data(), w.q.size(), cudaMemcpyHostToDevice));
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_kv, w.kv.data(), w.kv.size(), cudaMemcpyHostToDevice));
  FP8DSA_TOOL_CHECK_CUDA(
      cudaMemcpy(d_idx, w.indices.data(), w.indices.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  const auto params_for = [&](int h) {
    fp8dsa::SparseMlaParams p = fp8dsa::tools::mla_params(w, h);
    p.q = d_q;
    p.kv = d_kv;
    p.indices = d_idx;
    p.out = d_out;
    p.lse = d_lse;
    p.max_logits = d_max;
    return p;
  };

  // The same workload in DeepSeek-V3.2's rows (tools/v32_rows.h), built and uploaded on first use.
  std::optional<fp8dsa::tools::V32Workload> v32;
  uint8_t *d_q16 = nullptr, *d_rows = nullptr;
  const auto v32_params_for = [&](int h, int q_terms) {
    if (!v32) {
      v32 = fp8dsa::tools::make_v32_workload(w, spec.seed + 1);
      FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_q16, v32->q_bf16.size() * sizeof(uint16_t)));
      FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_rows, v32->kv.size()));
      FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_q16, v32->q_bf16.data(), v32->q_bf16.size() * sizeof(uint16_t),
                                        cudaMemcpyHostToDevice));
      FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_rows, v32->kv.data(), v32->kv.size(), cudaMemcpyHostToDevice));
    }
    fp8dsa::SparseMlaParams p = fp8dsa::tools::v32_mla_params(w, *v32, h);
    p.q = d_q16;
    p.kv = d_rows;
    p.indices = d_idx;
    p.out = d_out;
    p.lse = d_lse;
    p.max_logits = d_max;
    p.q_terms = q_terms;
    return p;
  };

  if (profile && argc > 2 && std::strcmp(argv[2], "v32") == 0) {
    const int h = argc > 3 ? std::atoi(argv[3]) : 128;
    const int q_terms = argc > 4 ? std::atoi(argv[4]) : 2;
    const fp8dsa::SparseMlaParams p = v32_params_for(h, q_terms);
    FP8DSA_TOOL_CHECK_OK(fp8dsa::validate(p));  // a head count or q_terms the library refuses, with its message
    const fp8dsa::Status st = fp8dsa::detail::sparse_mla::launch_sparse_mla_fp8(p);
    FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
    std::printf("profile launch v32 h=%d q_terms=%d: %s\n", h, q_terms, st.to_string().c_str());
    return st.is_ok() ? 0 : 1;
  }

  if (profile) {
    const int h = argc > 2 ? std::atoi(argv[2]) : 64;
    Fp8Tuning tuning;
    if (argc > 3) tuning.qk_chains = std::atoi(argv[3]);
    if (argc > 4) {
      tuning.small_heads = std::strcmp(argv[4], "padded") == 0 ? SmallHeads::kPadded : SmallHeads::kTransposed;
    }
    const fp8dsa::Status st = fp8dsa::detail::sparse_mla::launch_sparse_mla_fp8(params_for(h), tuning);
    FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
    std::printf("profile launch h=%d qk_chains=%d: %s\n", h, tuning.qk_chains, st.to_string().c_str());
    return st.is_ok() ? 0 : 1;
  }

  if (tail) {
    // The same inputs, the first T tokens.
    std::printf("%4s %6s %-12s %9s %9s\n", "h", "T", "tail_parts", "ms", "x_whole");
    for (int h : {128, 64}) {
      for (int64_t tokens : {int64_t{4096}, int64_t{4000}, int64_t{1000}, int64_t{140}, int64_t{16}, int64_t{1}}) {
        fp8dsa::SparseMlaParams p = params_for(h);
        p.num_tokens = tokens;
        double whole = 0.0;
        for (int parts : {1, 0, 2, 4, 8, 16}) {
          Fp8Tuning tuning;
          tuning.tail_parts = parts;
          const double ms = median_ms(p, reps, tuning);
          if (parts == 1) whole = ms;
          std::printf("%4d %6lld %-12s %9.4f %9.3f\n", h, static_cast<long long>(tokens),
                      parts == 0 ? "auto" : std::to_string(parts).c_str(), ms, ms > 0 ? whole / ms : 0.0);
        }
      }
    }
    return 0;
  }

  if (phases && argc > 2 && std::strcmp(argv[2], "v32") == 0) {
#if defined(FP8DSA_MLA_PHASE_PROBE)
    // Where a V3.2-row CTA's time goes (v32_kernel.cuh, phase_probe.cuh), on the same workload in
    // DeepSeek-V3.2's rows (tools/v32_rows.h), h = 64 and 128, q as two and as one e4m3 term.
    using namespace fp8dsa::detail::sparse_mla;
    int clock_khz = 0;
    const double us_per_cycle = nominal_us_per_cycle(&clock_khz);
    const double tiles = topk / 64.0;
    static const char* const kScoreNames[kV32ScoreChains + 1] = {"next tile's wait + its first chains", "softmax",
                                                                 "P slot wait", "P published + the other chains"};
    static const char* const kValueNames[kV32ValueRefill + 1] = {"stage wait + factors", "P wait",
                                                                 "rescale + barrier",    "P_b",
                                                                 "P.V",                  "refill"};
    for (int q_terms : {2, 1}) {
      for (int h : {64, 128}) {
        const size_t ctas = run_probed(v32_params_for(h, q_terms), T, h);
        std::vector<uint64_t> marks;
        std::vector<uint32_t> steps;
        FP8DSA_TOOL_CHECK_OK(read_v32_phase_probe(&marks));
        FP8DSA_TOOL_CHECK_OK(read_v32_pair_steps(&steps));
        double fill = 0, loop = 0, value_end = 0, end = 0;
        for (size_t i = 0; i < ctas; ++i) {
          const uint64_t* m = &marks[i * kNumMarks];
          fill += double(m[kMarkFirstScore] - m[kMarkEntry]);
          loop += double(m[kMarkLoopEnd] - m[kMarkFirstScore]);
          value_end += double(m[kMarkProducerEnd]) - double(m[kMarkEntry]);
          end += double(m[kMarkEnd] - m[kMarkEntry]);
        }
        const double n = static_cast<double>(ctas);
        std::printf("v32 q_terms=%d h=%d, %zu CTAs, us at %d MHz: entry -> first S %.2f; the score loop %.2f; "
                    "entry -> value group 0's loop end %.2f; entry -> its end %.2f\n",
                    q_terms, h, ctas, clock_khz / 1000, fill / n * us_per_cycle, loop / n * us_per_cycle,
                    value_end / n * us_per_cycle, end / n * us_per_cycle);
        std::printf("v32 q_terms=%d h=%d score group, cycles a tile:", q_terms, h);
        // The score group's last tile is peeled and not counted.
        print_step_means(steps, ctas, 0, kScoreNames, std::size(kScoreNames), tiles - 1, true);
        std::printf("v32 q_terms=%d h=%d value group 0, cycles a tile:", q_terms, h);
        print_step_means(steps, ctas, 1, kValueNames, std::size(kValueNames), tiles, true);
      }
    }
    return 0;
#else
    std::fprintf(stderr, "phases: configure with -DFP8DSA_MLA_PHASE_PROBE=ON\n");
    return 2;
#endif
  }

  if (phases) {
#if defined(FP8DSA_MLA_PHASE_PROBE)
    // Where a seesaw CTA's time goes (phase_probe.cuh), h = 64 and 128, averaged over the CTAs; the
    // cycles converted at the nominal clock (the SM's own runs lower under load).
    using namespace fp8dsa::detail::sparse_mla;
    int clock_khz = 0;
    const double us_per_cycle = nominal_us_per_cycle(&clock_khz);
    for (int h : {64, 128}) {
      const size_t ctas = run_probed(params_for(h), T, h);
      std::vector<uint64_t> marks;
      FP8DSA_TOOL_CHECK_OK(read_phase_probe(&marks));
      std::vector<const uint64_t*> cta(ctas);
      double fill = 0, pairs = 0, end = 0, producer_idle = 0, next = 0;
      for (size_t i = 0; i < ctas; ++i) {
        const uint64_t* m = &marks[i * kNumMarks];
        cta[i] = m;
        fill += double(m[kMarkFirstScore] - m[kMarkEntry]);
        pairs += double(m[kMarkLoopEnd] - m[kMarkFirstScore]);
        end += double(m[kMarkEnd] - m[kMarkLoopEnd]);
        producer_idle += double(m[kMarkLoopEnd]) - double(m[kMarkProducerEnd]);
      }
      // The next CTA on the same SM (clock64 is the SM's own counter).
      std::sort(cta.begin(), cta.end(), [](const uint64_t* a, const uint64_t* b) {
        return a[kMarkSmid] != b[kMarkSmid] ? a[kMarkSmid] < b[kMarkSmid] : a[kMarkEntry] < b[kMarkEntry];
      });
      int gaps = 0;
      for (size_t i = 1; i < ctas; ++i) {
        if (cta[i][kMarkSmid] != cta[i - 1][kMarkSmid]) continue;
        next += double(cta[i][kMarkEntry]) - double(cta[i - 1][kMarkEnd]);
        ++gaps;
      }
      const double n = static_cast<double>(ctas);
      std::printf("h=%d, %zu CTAs, us at %d MHz: entry -> first S %.2f; the pairs %.2f; last pair -> math group 0's "
                  "end %.2f; -> the SM's next CTA %.2f; the producer idle at the end %.2f\n",
                  h, ctas, clock_khz / 1000, fill / n * us_per_cycle, pairs / n * us_per_cycle, end / n * us_per_cycle,
                  gaps > 0 ? next / gaps * us_per_cycle : 0.0, producer_idle / n * us_per_cycle);
      // The pair loop's steps, cycles a pair, per math group (phase_probe.cuh: PairStep).
      std::vector<uint32_t> steps;
      FP8DSA_TOOL_CHECK_OK(read_pair_steps(&steps));
      // Averaged over a CTA's 16 pairs (the last, peeled, has no lead and no chains of a next tile).
      const double pairs_per_cta = 2048.0 / 64 / 2;
      static const char* const kStepNames[kNumPairSteps] = {"lead", "bounds", "probabilities", "P wait", "values",
                                                            "chains"};
      for (int g = 0; g < 2; ++g) {
        std::printf("h=%d math group %d, cycles a pair:", h, g);
        print_step_means(steps, ctas, g, kStepNames, kNumPairSteps, pairs_per_cta, false);
      }
    }
    return 0;
#else
    std::fprintf(stderr, "phases: configure with -DFP8DSA_MLA_PHASE_PROBE=ON\n");
    return 2;
#endif
  }

  if (overhead) {
    // Least squares of ms against tiles a CTA, over the lengths; the intercept spread over the items
    // an SM runs (a token's 64-head block, or a token at h < 64) is the fixed cost an item pays (us),
    // whatever the length.
    int sms = 0;
    FP8DSA_TOOL_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<int32_t> lengths(static_cast<size_t>(T));
    int32_t* d_len = nullptr;
    FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_len, T * sizeof(int32_t)));
    std::printf("%4s %6s %6s %9s\n", "h", "keys", "tiles", "ms");
    for (int h : {128, 64, 16, 8}) {
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      int count = 0;
      for (int keys : {2048, 1536, 1024, 512, 256}) {
        std::fill(lengths.begin(), lengths.end(), keys);
        FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_len, lengths.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
        fp8dsa::SparseMlaParams p = params_for(h);
        p.topk_length = d_len;
        Fp8Tuning tuning;
        tuning.tail_parts = 1;
        const double ms = median_ms(p, reps, tuning);
        const double tiles = keys / 64.0;
        std::printf("%4d %6d %6.0f %9.4f\n", h, keys, tiles, ms);
        sx += tiles;
        sy += ms;
        sxx += tiles * tiles;
        sxy += tiles * ms;
        ++count;
      }
      const double slope = (count * sxy - sx * sy) / (count * sxx - sx * sx);
      const double intercept = (sy - slope * sx) / count;
      const double items_per_sm = static_cast<double>(T) * (h == 128 ? 2 : 1) / sms;
      std::printf("h=%d: %.4f ms + %.4f ms a tile; at 32 tiles the fixed part is %.1f%%: %.2f us an item over %.1f "
                  "items an SM\n",
                  h, intercept, slope, 100.0 * intercept / (intercept + 32 * slope), intercept * 1e3 / items_per_sm,
                  items_per_sm);
    }
    cudaFree(d_len);
    return 0;
  }

  fp8dsa::bench::GemmYardstick gemm;
  fp8dsa::tools::TimingConfig tc;
  tc.reps = reps;
  const fp8dsa::Status gs = fp8dsa::bench::run_fp8_gemm_yardstick(8192, 8192, 8192, tc, 0, nullptr, &gemm);
  if (!gs.is_ok()) std::fprintf(stderr, "gemm yardstick: %s\n", gs.to_string().c_str());
  std::printf("FP8 GEMM 8192^3: %.3f ms, %.0f TFLOPS\n", gemm.timing.median_ms, gemm.tflops);
  std::printf("%4s %9s %-22s %9s %8s %7s\n", "h", "qk_chains", "path", "ms", "TFLOPS", "xGEMM");
  struct Run {
    int h;
    Fp8Tuning tuning;
  };
  std::vector<Run> runs;
  for (int h : {128, 64}) {
    for (int chains : fp8dsa::detail::sparse_mla::kSeesawQkChainChoices) runs.push_back({h, {chains, SmallHeads::kDefault}});
  }
  for (int h : {32, 16, 8}) {
    runs.push_back({h, {fp8dsa::detail::sparse_mla::kDefaultQkChains, SmallHeads::kPadded}});
    if (fp8dsa::detail::sparse_mla::has_transposed_kernel(h)) {
      runs.push_back({h, {fp8dsa::detail::sparse_mla::kDefaultQkChains, SmallHeads::kTransposed}});
    }
  }
  const double pairs = static_cast<double>(w.valid_pairs);
  for (const Run& run : runs) {
    const double ms = median_ms(params_for(run.h), reps, run.tuning);
    const double tflops = 2.0 * run.h * (d_qk + d_v) * pairs / (ms * 1e-3) / 1e12;
    const char* path = run.h >= 64 ? "64-head kernel"
                       : run.tuning.small_heads == SmallHeads::kPadded ? "64-head kernel, padded"
                                                                       : "transposed";
    std::printf("%4d %9d %-22s %9.3f %8.1f %7.3f\n", run.h, run.tuning.qk_chains, path, ms, tflops,
                gemm.tflops > 0 ? tflops / gemm.tflops : 0.0);
  }
  cudaFree(d_q);
  cudaFree(d_kv);
  cudaFree(d_idx);
  cudaFree(d_out);
  cudaFree(d_lse);
  cudaFree(d_max);
  return 0;
}
