// Sparse MLA prefill: T = 4096 tokens of one causal sequence over N latent rows (the last 4096 rows
// are the new tokens), topk = 2048 selected rows per token. The selections are distinct and all
// valid, spread over each token's visible range like a top-k of a long context. FLOPs:
// 2 * h * (d_qk + d_v) per (token, valid selected row).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "device_data.h"
#include "fp8dsa/sparse_mla.h"
#include "op_benches.h"

namespace fp8dsa::bench {
namespace {

constexpr int64_t kTokens = 4096;
constexpr int kTopk = 2048;
constexpr int kDimQk = 576;
constexpr int kDimV = 512;

uint64_t next_random(uint64_t& state) {
  uint64_t x = (state += 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Token t sees rows [0, visible) with visible = N - T + t + 1 >= topk: one random row from each of
// topk equal strata of that range (so the rows are distinct), in shuffled order.
std::vector<int32_t> causal_random_indices(int64_t num_keys, uint64_t seed, int64_t* valid) {
  std::vector<int32_t> indices(static_cast<size_t>(kTokens) * kTopk);
  uint64_t state = seed;
  *valid = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    int32_t* row = indices.data() + t * kTopk;
    const int64_t visible = num_keys - kTokens + t + 1;
    const int64_t take = std::min<int64_t>(kTopk, visible);
    for (int64_t j = 0; j < take; ++j) {
      const int64_t lo = j * visible / take, hi = (j + 1) * visible / take;
      row[j] = static_cast<int32_t>(lo + static_cast<int64_t>(next_random(state) % static_cast<uint64_t>(hi - lo)));
    }
    std::fill(row + take, row + kTopk, -1);
    for (int64_t j = take - 1; j > 0; --j) {
      std::swap(row[j], row[next_random(state) % static_cast<uint64_t>(j + 1)]);
    }
    *valid += take;
  }
  return indices;
}

struct MlaInputs {
  DeviceBuffer q, kv;
};

Status bench_sparse_mla_shape(const BenchContext& ctx, int64_t num_keys, int num_heads,
                              const DeviceBuffer& indices, int64_t valid) {
  const size_t q_bytes = static_cast<size_t>(kTokens) * num_heads * kDimQk;
  const size_t kv_bytes = static_cast<size_t>(num_keys) * kDimQk;
  const int sets = rotation_sets(q_bytes + kv_bytes, ctx.l2_bytes, 8);
  std::vector<MlaInputs> inputs(static_cast<size_t>(sets));
  for (int s = 0; s < sets; ++s) {
    MlaInputs& in = inputs[static_cast<size_t>(s)];
    FP8DSA_RETURN_IF_ERROR(in.q.allocate(q_bytes));
    FP8DSA_RETURN_IF_ERROR(in.kv.allocate(kv_bytes));
    FP8DSA_RETURN_IF_ERROR(fill_random_e4m3(in.q.get(), q_bytes, ctx.seed + 200 + 2 * s, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(fill_random_e4m3(in.kv.get(), kv_bytes, ctx.seed + 201 + 2 * s, 1.0f, ctx.stream));
  }
  DeviceBuffer out, lse, max_logits;
  FP8DSA_RETURN_IF_ERROR(out.allocate(static_cast<size_t>(kTokens) * num_heads * kDimV * 2));
  FP8DSA_RETURN_IF_ERROR(lse.allocate(static_cast<size_t>(kTokens) * num_heads * sizeof(float)));
  FP8DSA_RETURN_IF_ERROR(max_logits.allocate(static_cast<size_t>(kTokens) * num_heads * sizeof(float)));

  SparseMlaParams base;
  base.num_tokens = kTokens;
  base.num_kv = num_keys;
  base.num_heads = num_heads;
  base.d_qk = kDimQk;
  base.d_v = kDimV;
  base.indices = indices.as<int32_t>();
  base.topk = kTopk;
  base.sm_scale = 1.0f / std::sqrt(192.0f);  // DeepSeek-V3.2 without the YaRN factor
  base.out = out.get();
  base.lse = lse.as<float>();
  base.max_logits = max_logits.as<float>();
  base.stream = ctx.stream;

  ResultRow row;
  row.op = "sparse_mla";
  row.shape = shape_string({{"T", kTokens}, {"N", num_keys}, {"h", num_heads}, {"topk", kTopk}});
  row.kernel = sparse_mla_kernel_name(sparse_mla_route(base));
  auto launch = [&](int s) {
    SparseMlaParams p = base;
    p.q = inputs[static_cast<size_t>(s)].q.get();
    p.kv = inputs[static_cast<size_t>(s)].kv.get();
    return sparse_mla_prefill(p);
  };
  return time_and_record(ctx, sets, launch, std::move(row), [&](double seconds, ResultRow& r) {
    r.tflops = 2.0 * num_heads * (kDimQk + kDimV) * static_cast<double>(valid) / seconds / 1e12;
    // Gathered KV rows (each read once per token) dominate; q in, out/lse/max_logits out.
    const double bytes = static_cast<double>(valid) * kDimQk + static_cast<double>(q_bytes) +
                         static_cast<double>(out.bytes() + lse.bytes() + max_logits.bytes());
    r.gbps = bytes / seconds / 1e9;
  });
}

}  // namespace

Status run_sparse_mla_bench(const BenchContext& ctx) {
  const std::vector<int64_t> keys =
      ctx.quick ? std::vector<int64_t>{32768} : std::vector<int64_t>{8192, 32768, 65536, 131072};
  const std::vector<int> heads = ctx.quick ? std::vector<int>{128, 16} : std::vector<int>{128, 64, 32, 16};
  for (int64_t n : keys) {
    int64_t valid = 0;
    DeviceBuffer indices;
    FP8DSA_RETURN_IF_ERROR(upload(causal_random_indices(n, ctx.seed + static_cast<uint64_t>(n), &valid), &indices));
    for (int h : heads) FP8DSA_RETURN_IF_ERROR(bench_sparse_mla_shape(ctx, n, h, indices, valid));
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
