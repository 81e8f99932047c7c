// What the two sparse MLA benches (576-byte and V3.2 rows) share: their output buffers, the
// FlashMLA anchor (../shared/anchors: FlashMLA's SM90 BF16 sparse prefill) run through its `io` mode
// on our inputs (the inputs go to files in ctx.anchor_dir, the anchor times its kernel, median of
// its iterations, and writes its outputs, read back for the accuracy comparison), and the accuracy
// line.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"
#include "op_benches.h"
#include "tools/device_buffer.h"
#include "tools/mla_device_outputs.h"
#include "tools/mla_workload.h"
#include "tools/sampled_mla_reference.h"

namespace fp8dsa::bench {

// The shape both benches time: T = 4096 new tokens, topk = 2048, inputs for 128 heads (smaller h
// take the first heads), every 64th token checked against the f64 reference.
inline constexpr int64_t kMlaTokens = 4096;
inline constexpr int kMlaTopk = 2048;
inline constexpr int kMlaMaxHeads = 128;
inline constexpr int64_t kMlaCheckEvery = 64;

// The workload (tools/mla_workload.h) of that shape over num_keys rows, scores with score_std
// across a token's keys, of the given values and selection; seeded by ctx.seed and num_keys.
// unrounded: also keep the values before rounding, for every kMlaCheckEvery-th token (SPEC 6's R0).
tools::MlaWorkload make_bench_workload(const BenchContext& ctx, int64_t num_keys, double score_std,
                                       tools::MlaValues values = tools::MlaValues::kRealistic,
                                       bool unrounded = false,
                                       tools::MlaSelection selection = tools::MlaSelection::kRealistic);

// The input sets of both benches (label as in results.csv's data= token; --mla-data picks among
// them). At N = 32K each bench runs every set at h = 128 and 64, at the other N the realistic one.
struct MlaDataSet {
  const char* label;
  tools::MlaValues values;
  double score_std;
};
inline constexpr MlaDataSet kMlaDataSets[] = {
    {"realistic", tools::MlaValues::kRealistic, 3.0},  {"peaked", tools::MlaValues::kRealistic, 10.0},
    {"random", tools::MlaValues::kRandom, 3.5},         {"random_std1", tools::MlaValues::kRandom, 1.0},
    {"random_std10", tools::MlaValues::kRandom, 10.0},  {"zeros", tools::MlaValues::kZeros, 1.0},
};

// Whether --mla-data asks for `set` (all sets when it names none).
bool mla_data_wanted(const BenchContext& ctx, const MlaDataSet& set);

// An e4m3 byte as the bf16 value FlashMLA takes (exact: every e4m3 value is a bf16 value), from a
// table built once, and a whole array of them.
inline uint16_t bf16_of_e4m3(uint8_t bits) {
  static const std::array<uint16_t, 256> kTable = [] {
    std::array<uint16_t, 256> t{};
    for (int b = 0; b < 256; ++b) t[static_cast<size_t>(b)] = float_to_bf16(e4m3_to_float(static_cast<uint8_t>(b)));
    return t;
  }();
  return kTable[bits];
}
std::vector<uint16_t> bf16_of_e4m3(const std::vector<uint8_t>& e4m3);

struct FlashMlaInputs {
  int64_t num_tokens, num_kv;
  int num_heads, topk;
  float sm_scale;
  const std::vector<uint16_t>* q;        // [T, h, 576] bf16, packed
  const std::vector<uint16_t>* kv;       // [N, 576] bf16, packed
  const std::vector<int32_t>* indices;   // [T, topk]
};

Status run_flashmla_io(const BenchContext& ctx, const FlashMlaInputs& in, double* ms, std::vector<uint16_t>* out,
                       std::vector<float>* lse, std::vector<float>* max_logits);

// SGLang's FP8 kernel (ctx.q8kv8) through its `io` mode on e4m3 inputs (unit scales): q [T, h, 576]
// and kv [N, 576] packed, indices [T, topk].
struct Q8kv8Inputs {
  int64_t num_tokens, num_kv;
  int num_heads, topk;
  float sm_scale;
  const std::vector<uint8_t>* q;
  const std::vector<uint8_t>* kv;
  const std::vector<int32_t>* indices;
};

Status run_q8kv8_io(const BenchContext& ctx, const Q8kv8Inputs& in, double* ms, std::vector<uint16_t>* out,
                    std::vector<float>* lse, std::vector<float>* max_logits);

// FlashMLA's FP8-cache sparse decode kernel run as prefill (ctx.flashmla_kv, bench/anchors/
// flashmla_kv_io.py) on DeepSeek-V3.2's rows as they are: q [T, h, 576] bf16, kv [N, 656] bytes,
// indices [T, topk]. The kernel returns no max_logits: *max_logits comes back NaN.
struct FlashMlaKvInputs {
  int64_t num_tokens, num_kv;
  int num_heads, topk;
  float sm_scale;
  const std::vector<uint16_t>* q;
  const std::vector<uint8_t>* kv;
  const std::vector<int32_t>* indices;
};

Status run_flashmla_kv_io(const BenchContext& ctx, const FlashMlaKvInputs& in, double* ms,
                          std::vector<uint16_t>* out, std::vector<float>* lse, std::vector<float>* max_logits);

// One kernel's accuracy line against the sampled f64 reference, as the sparse MLA benches print it.
// rounded_inputs: the inputs were rounded from continuous values, so SPEC 6's verdict is the rounding
// line's and this line's bound (the e4m3-exact one) is reported, not judged.
void print_mla_accuracy(const char* who, const std::string& shape, const tools::SparseMlaCheck& c,
                        bool rounded_inputs = false);
// The same kernel against the rounding of its inputs (SPEC 6, metrics.h: check_against_rounding).
void print_rounding_accuracy(const char* who, const std::string& shape, const tools::RoundingCheck& c);

}  // namespace fp8dsa::bench
