#include "indexer_inputs.h"

namespace fp8dsa::bench {

IndexerParams IndexerInputs::params(const IndexerParams& base) const {
  IndexerParams p = base;
  p.q = q.get();
  p.w = w.as<float>();
  p.k = k.get();
  p.k_scale = k_scale.as<float>();
  return p;
}

IndexerParams causal_indexer_shape(const BenchContext& ctx, int64_t num_tokens, int64_t num_keys, int num_heads,
                                   int head_dim, const tools::CausalBounds& bounds) {
  IndexerParams p;
  p.num_tokens = num_tokens;
  p.num_keys = num_keys;
  p.num_heads = num_heads;
  p.head_dim = head_dim;
  p.ks = bounds.ks.as<int32_t>();
  p.ke = bounds.ke.as<int32_t>();
  p.stream = ctx.stream;
  return p;
}

Status topk_of_logits(const IndexerParams& scores, const float* logits, int k, int32_t* indices,
                      tools::DeviceBytes* workspace, TopkParams* out) {
  TopkParams t;
  t.num_rows = scores.num_tokens;
  t.num_keys = scores.num_keys;
  t.logits = logits;
  t.ks = scores.ks;
  t.ke = scores.ke;
  t.k = k;
  t.indices = indices;
  t.stream = scores.stream;
  FP8DSA_RETURN_IF_ERROR(workspace->allocate(topk_workspace_bytes(t)));
  t.workspace = workspace->get();
  t.workspace_bytes = workspace->bytes();
  *out = t;
  return Status::ok();
}

Status make_indexer_inputs(const BenchContext& ctx, int64_t num_tokens, int64_t num_keys, int num_heads, int head_dim,
                           std::vector<IndexerInputs>* sets) {
  const size_t q_bytes = static_cast<size_t>(num_tokens) * num_heads * head_dim;
  const size_t w_bytes = static_cast<size_t>(num_tokens) * num_heads * sizeof(float);
  const size_t k_bytes = static_cast<size_t>(num_keys) * head_dim;
  const size_t k_scale_bytes = static_cast<size_t>(num_keys) * sizeof(float);
  const size_t bytes = q_bytes + w_bytes + k_bytes + k_scale_bytes;
  const int count = tools::rotation_sets(bytes, ctx.l2_bytes);
  sets->clear();
  sets->resize(static_cast<size_t>(count));
  for (int s = 0; s < count; ++s) {
    IndexerInputs& in = (*sets)[static_cast<size_t>(s)];
    const uint64_t seed = ctx.seed + 16 * static_cast<uint64_t>(s);
    in.bytes = bytes;
    FP8DSA_RETURN_IF_ERROR(in.q.allocate(q_bytes));
    FP8DSA_RETURN_IF_ERROR(in.w.allocate(w_bytes));
    FP8DSA_RETURN_IF_ERROR(in.k.allocate(k_bytes));
    FP8DSA_RETURN_IF_ERROR(in.k_scale.allocate(k_scale_bytes));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.q.get(), q_bytes, seed + 1, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_uniform(in.w.as<float>(), w_bytes / 4, seed + 2, -1.0f, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.k.get(), k_bytes, seed + 3, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(
        tools::fill_random_uniform(in.k_scale.as<float>(), k_scale_bytes / 4, seed + 4, 0.5f, 1.5f, ctx.stream));
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
