// Indexer scoring: one sequence of T = 4096 new tokens over N - 4096 cached keys (causal), the
// DeepSeek-V3.2 prefill shape. FLOPs count valid (token, key) pairs only: 2 * H * D each.
#include <vector>

#include "tools/device_random.h"
#include "fp8dsa/indexer.h"
#include "op_benches.h"

namespace fp8dsa::bench {
namespace {

constexpr int64_t kTokens = 4096;
constexpr int kHeadDim = 128;

struct IndexerInputs {
  tools::DeviceBytes q, w, k, k_scale;
};

Status bench_indexer_shape(const BenchContext& ctx, int64_t num_keys, int num_heads) {
  tools::CausalBounds bounds;
  FP8DSA_RETURN_IF_ERROR(tools::upload_causal_bounds(kTokens, num_keys - kTokens, &bounds));

  const size_t q_bytes = static_cast<size_t>(kTokens) * num_heads * kHeadDim;
  const size_t w_bytes = static_cast<size_t>(kTokens) * num_heads * sizeof(float);
  const size_t k_bytes = static_cast<size_t>(num_keys) * kHeadDim;
  const size_t k_scale_bytes = static_cast<size_t>(num_keys) * sizeof(float);
  const int sets = tools::rotation_sets(q_bytes + w_bytes + k_bytes + k_scale_bytes, ctx.l2_bytes);

  std::vector<IndexerInputs> inputs(static_cast<size_t>(sets));
  for (int s = 0; s < sets; ++s) {
    IndexerInputs& in = inputs[static_cast<size_t>(s)];
    const uint64_t seed = ctx.seed + 16 * static_cast<uint64_t>(s);
    FP8DSA_RETURN_IF_ERROR(in.q.allocate(q_bytes));
    FP8DSA_RETURN_IF_ERROR(in.w.allocate(w_bytes));
    FP8DSA_RETURN_IF_ERROR(in.k.allocate(k_bytes));
    FP8DSA_RETURN_IF_ERROR(in.k_scale.allocate(k_scale_bytes));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.q.get(), q_bytes, seed + 1, 1.0f, ctx.stream));
    // Weights may be negative: the query scale and the head weight are folded together.
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_uniform(in.w.as<float>(), w_bytes / 4, seed + 2, -1.0f, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.k.get(), k_bytes, seed + 3, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(
        tools::fill_random_uniform(in.k_scale.as<float>(), k_scale_bytes / 4, seed + 4, 0.5f, 1.5f, ctx.stream));
  }
  tools::DeviceBytes logits;
  FP8DSA_RETURN_IF_ERROR(logits.allocate(static_cast<size_t>(kTokens) * num_keys * sizeof(float)));

  IndexerParams base;
  base.num_tokens = kTokens;
  base.num_keys = num_keys;
  base.num_heads = num_heads;
  base.head_dim = kHeadDim;
  base.ks = bounds.ks.as<int32_t>();
  base.ke = bounds.ke.as<int32_t>();
  base.logits = logits.as<float>();
  base.stream = ctx.stream;

  ResultRow row;
  row.op = "indexer";
  row.shape = shape_string({{"T", kTokens}, {"N", num_keys}, {"H", num_heads}}, "causal");
  row.kernel = indexer_kernel_name(indexer_route(base));

  auto launch = [&](int s) {
    IndexerParams p = base;
    const IndexerInputs& in = inputs[static_cast<size_t>(s)];
    p.q = in.q.get();
    p.w = in.w.as<float>();
    p.k = in.k.get();
    p.k_scale = in.k_scale.as<float>();
    return indexer_logits(p);
  };
  return time_and_record(ctx, sets, launch, std::move(row), [&](double seconds, ResultRow& r) {
    r.tflops = 2.0 * num_heads * kHeadDim * static_cast<double>(bounds.valid_pairs) / seconds / 1e12;
    // Reads q, w, k, k_scale once; writes the valid logits.
    const double bytes = static_cast<double>(q_bytes + w_bytes + k_bytes + k_scale_bytes) +
                         4.0 * static_cast<double>(bounds.valid_pairs);
    r.gbps = bytes / seconds / 1e9;
  });
}

}  // namespace

Status run_indexer_bench(const BenchContext& ctx) {
  const std::vector<int64_t> keys =
      ctx.quick ? std::vector<int64_t>{65536} : std::vector<int64_t>{8192, 32768, 65536, 131072};
  const std::vector<int> heads = ctx.quick ? std::vector<int>{64} : std::vector<int>{64, 32};
  for (int64_t n : keys) {
    for (int h : heads) FP8DSA_RETURN_IF_ERROR(bench_indexer_shape(ctx, n, h));
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
