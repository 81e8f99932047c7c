// Sparse MLA GPU tests: one random problem (host inputs, their device copies, params for both)
// from a case description, shared by the reference-kernel and the FP8-kernel tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/gpu_test.h"
#include "common/rerun.h"
#include "fp8dsa/sparse_mla.h"
#include "tools/mla_workload.h"

namespace fp8dsa::mla_test {

constexpr int kDqk = 576, kDv = 512;

struct MlaCase {
  int64_t num_kv;
  int topk;
  int num_heads;
  int64_t num_tokens;
  bool topk_length = false;  // per-token lengths: full, 0, random, negative, past topk, 65
  bool sink = false;         // random sinks, with +inf on head 0 and -inf on the last head
  bool padded_strides = false;  // every stride padded; the padding bytes are NaN in every type read
  float q_scale = 1.0f, kv_scale = 1.0f;
  bool max_logits = true;    // false: max_logits not requested (stays poisoned)
  float sm_scale = 0.0f;     // 0 = 1/sqrt(192)
  float q_range = 2.0f;      // q uniform in [-q_range, q_range): larger = peakier softmax
  bool distinct = true;      // false: keys may repeat within a token's list
  double invalid_fraction = 0.1;
  // > 0: the realistic inputs of tools/mla_workload.h (selections in relevance order that overlap
  // between neighbouring tokens, scores with this std across keys; needs N >= T) instead of uniform
  // q / kv and random indices. q_range, distinct and invalid_fraction then do not apply.
  double score_std = 0.0;
  tools::MlaValues values = tools::MlaValues::kRealistic;  // with score_std > 0: what q and kv are made of
  SparseMlaKernel kernel = SparseMlaKernel::kFp8;
  // kDeepSeekV32: bf16 q and 656-byte rows whose nope blocks have scales spread over 8x (some zero),
  // from the same kinds of values (the realistic path: tools::make_v32_workload).
  KvFormat kv_format = KvFormat::kE4m3;
  // kDeepSeekV32 with score_std > 0 and unit scales: keep the values before their rounding to bf16
  // q and to the V3.2 rows too, so that SPEC 6's bound against the rounding judges the run (the
  // e4m3 format keeps them always).
  bool v32_against_rounding = false;
  int q_terms = 2;  // kDeepSeekV32: SparseMlaParams::q_terms

  std::string name() const;
};

// Host inputs and their device copies for one case; `host` and `device` describe the same problem
// (indices with the SPEC's invalid values mixed in, and one token with no valid key at all).
struct MlaProblem {
  std::string workload;  // the realistic inputs' measured statistics (MlaCase::score_std > 0)
  std::vector<uint8_t> q, kv;  // q: e4m3 or bf16 bytes (kv_format)
  // The workload's values before their rounding (q in q's layout, kv packed [N, 576]), kept for the
  // e4m3 row format with unit scales and score_std > 0, and for V3.2 rows with v32_against_rounding:
  // SPEC 6's R0. Empty otherwise.
  std::vector<float> q_unrounded, kv_unrounded;
  std::vector<int32_t> indices, topk_length;
  std::vector<float> sink;
  SparseMlaParams host, device;
  tools::DeviceBuffer<uint8_t> d_q, d_kv;
  tools::DeviceBuffer<int32_t> d_indices, d_topk_length;
  tools::DeviceBuffer<float> d_sink, d_lse, d_max_logits;
  tools::DeviceBuffer<uint16_t> d_out;
};

void make_problem(const MlaCase& c, uint64_t seed, MlaProblem* pr);

// The out elements a kernel owns: d_v columns of each (token, head) row.
std::function<bool(size_t)> out_cells(const SparseMlaParams& p);

// out, lse and (when requested) max_logits, for testing::reruns_bitwise_equal.
std::vector<testing::RerunOutput> rerun_outputs(MlaProblem& pr);

// The problem's kv rows at the end of a device pool of pool_rows rows (so that row offsets pass
// 2^31 bytes where the pool is that large), its indices moved with them (N, the first invalid
// index, becomes pool_rows): `device` is pr.device over the pool, with the same results.
struct PoolPlacement {
  tools::DeviceBuffer<uint8_t> pool;
  tools::DeviceBuffer<int32_t> indices;
  SparseMlaParams device;
};
void place_at_pool_end(const MlaProblem& pr, int64_t pool_rows, PoolPlacement* out);

// Runs `launch` on pr's poisoned outputs and expects them bitwise equal to the given ones.
void expect_same_outputs(MlaProblem& pr, const std::function<Status()>& launch, const std::vector<uint16_t>& out,
                         const std::vector<float>& lse, const std::vector<float>& max_logits);

}  // namespace fp8dsa::mla_test
