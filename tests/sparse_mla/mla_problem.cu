#include "mla_problem.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "tools/random_inputs.h"
#include "tools/mla_workload.h"

namespace fp8dsa::mla_test {

using tools::DeviceBuffer;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

std::string MlaCase::name() const {
  return "N=" + std::to_string(num_kv) + " topk=" + std::to_string(topk) + " h=" + std::to_string(num_heads) +
         " T=" + std::to_string(num_tokens) + (topk_length ? " +topk_length" : "") + (sink ? " +sink" : "") +
         (padded_strides ? " +strides" : "") + (distinct ? "" : " +duplicates") + (max_logits ? "" : " -max_logits") +
         (score_std > 0.0 ? " realistic std=" + std::to_string(score_std).substr(0, 4) : "") +
         " kernel=" + sparse_mla_kernel_name(kernel);
}

void make_problem(const MlaCase& c, uint64_t seed, MlaProblem* pr) {
  const int64_t T = c.num_tokens, N = c.num_kv;
  const int h = c.num_heads;
  SparseMlaParams& p = pr->host;
  p.num_tokens = T;
  p.num_kv = N;
  p.num_heads = h;
  p.topk = c.topk;
  p.q_head_stride = kDqk + (c.padded_strides ? 64 : 0);
  p.q_token_stride = h * p.q_head_stride + (c.padded_strides ? 48 : 0);
  p.kv_row_stride = c.padded_strides ? 656 : kDqk;  // the V3.2 FP8 cache row size
  p.indices_stride = c.topk + (c.padded_strides ? 3 : 0);
  p.out_head_stride = kDv + (c.padded_strides ? 24 : 0);
  p.out_token_stride = h * p.out_head_stride + (c.padded_strides ? 16 : 0);
  p.sm_scale = c.sm_scale > 0.0f ? c.sm_scale : 1.0f / std::sqrt(192.0f);
  p.q_scale = c.q_scale;
  p.kv_scale = c.kv_scale;
  p.kernel = c.kernel;

  std::vector<int32_t> packed;
  if (c.score_std > 0.0) {
    tools::MlaWorkloadSpec spec;
    spec.num_tokens = T;
    spec.num_kv = N;
    spec.num_heads = h;
    spec.topk = c.topk;
    spec.sm_scale = p.sm_scale * p.q_scale * p.kv_scale;
    spec.score_std = c.score_std;
    spec.seed = seed;
    tools::MlaWorkload w = tools::make_mla_workload(spec);
    pr->workload = w.describe();
    pr->q.assign(static_cast<size_t>(T * p.q_token_stride), 0);
    pr->kv.assign(static_cast<size_t>(std::max<int64_t>(N, 1) * p.kv_row_stride), 0);
    for (int64_t th = 0; th < T * h; ++th) {
      std::copy_n(w.q.begin() + th * kDqk, kDqk,
                  pr->q.begin() + (th / h) * p.q_token_stride + (th % h) * p.q_head_stride);
    }
    for (int64_t r = 0; r < N; ++r) std::copy_n(w.kv.begin() + r * kDqk, kDqk, pr->kv.begin() + r * p.kv_row_stride);
    packed = std::move(w.indices);
  } else {
    pr->q = tools::random_e4m3(static_cast<size_t>(T * p.q_token_stride), seed, -c.q_range, c.q_range);
    pr->kv = tools::random_e4m3(static_cast<size_t>(std::max<int64_t>(N, 1) * p.kv_row_stride), seed + 1);
    packed = tools::random_indices(T, c.topk, N, seed + 2, c.invalid_fraction, c.distinct);
  }
  if (c.padded_strides) {
    // Padding bytes are e4m3 NaN: a kernel that reads them poisons its output.
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < p.q_token_stride; ++i)
        if (i >= h * p.q_head_stride || i % p.q_head_stride >= kDqk) pr->q[t * p.q_token_stride + i] = 0x7F;
    for (int64_t r = 0; r < N; ++r)
      for (int64_t i = kDqk; i < p.kv_row_stride; ++i) pr->kv[r * p.kv_row_stride + i] = 0x7F;
  }

  pr->indices.assign(static_cast<size_t>(T * p.indices_stride), INT_MIN);
  for (int64_t t = 0; t < T; ++t)
    std::copy_n(packed.begin() + t * c.topk, c.topk, pr->indices.begin() + t * p.indices_stride);
  if (T > 1) {  // one token with no valid key at all
    const std::vector<int32_t> invalid = tools::invalid_index_values(N);
    for (int j = 0; j < c.topk; ++j) pr->indices[(T / 2) * p.indices_stride + j] = invalid[j % invalid.size()];
  }
  tools::Random rng(seed + 3);
  if (c.topk_length) {
    pr->topk_length.resize(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      switch (t % 6) {
        case 0: pr->topk_length[t] = c.topk; break;
        case 1: pr->topk_length[t] = 0; break;
        case 2: pr->topk_length[t] = static_cast<int32_t>(rng.uniform_int(1, c.topk - 1)); break;
        case 3: pr->topk_length[t] = -3; break;                // clamps to 0
        case 4: pr->topk_length[t] = c.topk + 100; break;      // clamps to topk
        default: pr->topk_length[t] = std::min(c.topk, 65); break;  // one key into the second tile
      }
    }
  }
  if (c.sink) {
    pr->sink = tools::random_f32(static_cast<size_t>(h), seed + 4, -2.0f, 4.0f);
    pr->sink[0] = kInf;             // the whole head's output vanishes
    pr->sink[h - 1] = -kInf;        // no effect
  }

  pr->d_q = DeviceBuffer<uint8_t>(pr->q);
  pr->d_kv = DeviceBuffer<uint8_t>(pr->kv);
  pr->d_indices = DeviceBuffer<int32_t>(pr->indices);
  pr->d_out = DeviceBuffer<uint16_t>(static_cast<size_t>(T * p.out_token_stride));
  pr->d_lse = DeviceBuffer<float>(static_cast<size_t>(T * h));
  pr->d_max_logits = DeviceBuffer<float>(static_cast<size_t>(T * h));
  p.q = pr->q.data();
  p.kv = N > 0 ? pr->kv.data() : nullptr;
  p.indices = pr->indices.data();
  SparseMlaParams& d = pr->device;
  d = p;
  d.q = pr->d_q.get();
  d.kv = N > 0 ? pr->d_kv.get() : nullptr;
  d.indices = pr->d_indices.get();
  d.out = pr->d_out.get();
  d.lse = pr->d_lse.get();
  d.max_logits = c.max_logits ? pr->d_max_logits.get() : nullptr;
  if (c.topk_length) {
    pr->d_topk_length = DeviceBuffer<int32_t>(pr->topk_length);
    p.topk_length = pr->topk_length.data();
    d.topk_length = pr->d_topk_length.get();
  }
  if (c.sink) {
    pr->d_sink = DeviceBuffer<float>(pr->sink);
    p.attn_sink = pr->sink.data();
    d.attn_sink = pr->d_sink.get();
  }
}

std::function<bool(size_t)> out_cells(const SparseMlaParams& p) {
  return [p](size_t i) {
    const int64_t t = static_cast<int64_t>(i) / p.out_token_stride;
    const int64_t rest = static_cast<int64_t>(i) % p.out_token_stride;
    return t < p.num_tokens && rest / p.out_head_stride < p.num_heads && rest % p.out_head_stride < p.d_v;
  };
}

std::vector<testing::RerunOutput> rerun_outputs(MlaProblem& pr) {
  std::vector<testing::RerunOutput> outputs = {testing::rerun_output(pr.d_out, "out"),
                                               testing::rerun_output(pr.d_lse, "lse")};
  if (pr.device.max_logits) outputs.push_back(testing::rerun_output(pr.d_max_logits, "max_logits"));
  return outputs;
}

}  // namespace fp8dsa::mla_test
