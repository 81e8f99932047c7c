#include "mla_problem.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/poison.h"
#include "tools/mla_workload.h"
#include "tools/random_inputs.h"
#include "tools/v32_rows.h"

namespace fp8dsa::mla_test {

using tools::DeviceBuffer;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
// NaN as e4m3 (0x7F) and, for the V3.2 rows' padding, in every type a kernel could read there
// (e4m3, bf16, f32 all-ones).
constexpr uint8_t kE4m3NaN = 0x7F, kAllOnes = 0xFF;
constexpr uint16_t kBf16NaN = 0xFFFF;

// N V3.2 rows at `stride` bytes: values uniform in [-1, 1), each nope block scaled by 2^u (u uniform
// in [-1.5, 1.5): the block scales spread over 8x), every 23rd block zero (scale 0), the rope as is.
std::vector<uint8_t> random_v32_kv(int64_t N, int64_t stride, uint64_t seed) {
  std::vector<uint8_t> kv(static_cast<size_t>(std::max<int64_t>(N, 1) * stride), 0);
  std::vector<float> values = tools::random_f32(static_cast<size_t>(N * kDqk), seed);
  tools::Random rng(seed + 1);
  constexpr int kBlocks = kV32ScaleOffset / kV32ScaleBlock;
  for (int64_t n = 0; n < N; ++n) {
    float* row = values.data() + n * kDqk;
    for (int b = 0; b < kBlocks; ++b) {
      const bool zero = (n * kBlocks + b) % 23 == 5;
      const float factor = zero ? 0.0f : static_cast<float>(std::exp2(rng.uniform(-1.5, 1.5)));
      for (int c = 0; c < kV32ScaleBlock; ++c) row[b * kV32ScaleBlock + c] *= factor;
    }
    tools::quantize_v32_row(row, kv.data() + n * stride);
  }
  return kv;
}

// T * h packed rows of kDqk elements at p's q strides, in a buffer whose padding is `pad`.
template <typename T>
std::vector<T> strided_q(const std::vector<T>& rows, const SparseMlaParams& p, T pad) {
  std::vector<T> q(static_cast<size_t>(p.num_tokens * p.q_token_stride), pad);
  for (int64_t th = 0; th < p.num_tokens * p.num_heads; ++th) {
    std::copy_n(rows.begin() + th * kDqk, kDqk,
                q.begin() + (th / p.num_heads) * p.q_token_stride + (th % p.num_heads) * p.q_head_stride);
  }
  return q;
}

// Every element of q outside the T x h rows of d_qk becomes `pad`.
template <typename T>
void pad_q(const SparseMlaParams& p, T pad, T* q) {
  for (int64_t t = 0; t < p.num_tokens; ++t)
    for (int64_t i = 0; i < p.q_token_stride; ++i)
      if (i >= p.num_heads * p.q_head_stride || i % p.q_head_stride >= kDqk) q[t * p.q_token_stride + i] = pad;
}

}  // namespace

std::string MlaCase::name() const {
  return "N=" + std::to_string(num_kv) + " topk=" + std::to_string(topk) + " h=" + std::to_string(num_heads) +
         " T=" + std::to_string(num_tokens) + (topk_length ? " +topk_length" : "") + (sink ? " +sink" : "") +
         (padded_strides ? " +strides" : "") + (distinct ? "" : " +duplicates") + (max_logits ? "" : " -max_logits") +
         (score_std > 0.0 ? std::string(" ") + tools::mla_values_name(values) + " std=" + std::to_string(score_std).substr(0, 4) : "") +
         (kv_format == KvFormat::kE4m3 ? "" : std::string(" kv=") + kv_format_name(kv_format)) +
         (v32_against_rounding ? " +against_rounding" : "") +
         (q_terms != 2 ? " q_terms=" + std::to_string(q_terms) : "") +
         " kernel=" + sparse_mla_kernel_name(kernel);
}

void make_problem(const MlaCase& c, uint64_t seed, MlaProblem* pr) {
  const int64_t T = c.num_tokens, N = c.num_kv;
  const int h = c.num_heads;
  const bool v32 = c.kv_format == KvFormat::kDeepSeekV32;
  const int64_t row_bytes = v32 ? kV32RowBytes : kDqk;
  SparseMlaParams& p = pr->host;
  p.num_tokens = T;
  p.num_kv = N;
  p.num_heads = h;
  p.topk = c.topk;
  p.kv_format = c.kv_format;
  p.q_terms = c.q_terms;
  p.q_dtype = v32 ? DType::kBF16 : DType::kE4M3;
  p.q_head_stride = kDqk + (c.padded_strides ? 64 : 0);
  p.q_token_stride = h * p.q_head_stride + (c.padded_strides ? 48 : 0);
  // e4m3 rows padded to the V3.2 FP8 cache row size; V3.2 rows by 48 bytes.
  p.kv_row_stride = c.padded_strides ? kV32RowBytes + (v32 ? 48 : 0) : row_bytes;
  p.indices_stride = c.topk + (c.padded_strides ? 3 : 0);
  p.out_head_stride = kDv + (c.padded_strides ? 24 : 0);
  p.out_token_stride = h * p.out_head_stride + (c.padded_strides ? 16 : 0);
  p.sm_scale = c.sm_scale > 0.0f ? c.sm_scale : 1.0f / std::sqrt(192.0f);
  p.q_scale = c.q_scale;
  p.kv_scale = c.kv_scale;
  p.kernel = c.kernel;

  std::vector<uint16_t> q_bf16;  // V3.2: q before it becomes pr->q's bytes
  pr->kv.assign(static_cast<size_t>(std::max<int64_t>(N, 1) * p.kv_row_stride), 0);
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
    spec.values = c.values;
    const bool keep_unrounded = (!v32 || c.v32_against_rounding) && c.q_scale == 1.0f && c.kv_scale == 1.0f;
    spec.unrounded_every = keep_unrounded ? 1 : 0;
    tools::MlaWorkload w = tools::make_mla_workload(spec);
    if (keep_unrounded && !v32) {
      pr->q_unrounded = strided_q(w.q_unrounded, p, std::numeric_limits<float>::quiet_NaN());
      pr->kv_unrounded = std::move(w.kv_unrounded);
    }
    pr->workload = w.describe();
    if (v32) {
      tools::V32Workload v = tools::make_v32_workload(w, seed + 5);  // from w's unrounded values, if kept
      if (keep_unrounded) {
        pr->q_unrounded = strided_q(v.q_unrounded, p, std::numeric_limits<float>::quiet_NaN());
        pr->kv_unrounded = std::move(v.kv_unrounded);
      }
      q_bf16 = strided_q(v.q_bf16, p, kBf16NaN);
      for (int64_t r = 0; r < N; ++r) {
        std::copy_n(v.kv.begin() + r * row_bytes, row_bytes, pr->kv.begin() + r * p.kv_row_stride);
      }
    } else {
      pr->q = strided_q(w.q, p, kE4m3NaN);
      for (int64_t r = 0; r < N; ++r) std::copy_n(w.kv.begin() + r * kDqk, kDqk, pr->kv.begin() + r * p.kv_row_stride);
    }
    packed = std::move(w.indices);
  } else {
    if (v32) {
      q_bf16 = tools::random_bf16(static_cast<size_t>(T * p.q_token_stride), seed, -c.q_range, c.q_range);
      pr->kv = random_v32_kv(N, p.kv_row_stride, seed + 1);
    } else {
      pr->q = tools::random_e4m3(static_cast<size_t>(T * p.q_token_stride), seed, -c.q_range, c.q_range);
      pr->kv = tools::random_e4m3(static_cast<size_t>(std::max<int64_t>(N, 1) * p.kv_row_stride), seed + 1);
    }
    packed = tools::random_indices(T, c.topk, N, seed + 2, c.invalid_fraction, c.distinct);
  }
  if (c.padded_strides) {
    // Padding is NaN: a kernel that reads it poisons its output.
    if (v32) {
      pad_q(p, kBf16NaN, q_bf16.data());
    } else {
      pad_q(p, kE4m3NaN, pr->q.data());
    }
    for (int64_t r = 0; r < N; ++r)
      for (int64_t i = row_bytes; i < p.kv_row_stride; ++i) pr->kv[r * p.kv_row_stride + i] = v32 ? kAllOnes : kE4m3NaN;
  }
  if (v32) {
    pr->q.resize(q_bf16.size() * sizeof(uint16_t));
    std::memcpy(pr->q.data(), q_bf16.data(), pr->q.size());
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

void place_at_pool_end(const MlaProblem& pr, int64_t pool_rows, PoolPlacement* out) {
  const SparseMlaParams host = pr.host.resolved();
  const int64_t rows = host.num_kv, row_bytes = host.kv_row_stride, base = pool_rows - rows;
  ASSERT_GE(base, 0);
  out->pool = DeviceBuffer<uint8_t>(static_cast<size_t>(pool_rows * row_bytes));
  FP8DSA_ASSERT_CUDA(cudaMemcpy(out->pool.get() + base * row_bytes, pr.kv.data(), rows * row_bytes,
                                cudaMemcpyHostToDevice));
  std::vector<int32_t> indices = pr.indices;
  for (int32_t& i : indices) {
    if (i >= 0 && i < rows) {
      i += static_cast<int32_t>(base);
    } else if (i == rows) {
      i = static_cast<int32_t>(pool_rows);  // still the first invalid row
    }
  }
  out->indices = DeviceBuffer<int32_t>(indices);
  out->device = pr.device;
  out->device.num_kv = pool_rows;
  out->device.kv = out->pool.get();
  out->device.indices = out->indices.get();
}

void expect_same_outputs(MlaProblem& pr, const std::function<Status()>& launch, const std::vector<uint16_t>& out,
                         const std::vector<float>& lse, const std::vector<float>& max_logits) {
  testing::poison(pr.d_out);
  testing::poison(pr.d_lse);
  FP8DSA_ASSERT_STATUS_OK(launch());
  EXPECT_TRUE(pr.d_out.download() == out);
  const std::vector<float> got_lse = pr.d_lse.download(), got_max = pr.d_max_logits.download();
  EXPECT_EQ(0, std::memcmp(got_lse.data(), lse.data(), lse.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(got_max.data(), max_logits.data(), max_logits.size() * sizeof(float)));
}

}  // namespace fp8dsa::mla_test
