// The whole prefill through fp8dsa::prefill: one sequence of T = 4096 new tokens over a cache of
// 28672 rows, so N = 32768 key rows (the DeepSeek-V3.2 prefill default the CLI runs too);
// indexer H = 64, D = 128; attention h = 128, topk = 2048. TFLOPS counts the indexer's and the
// attention's valid FLOPs (the top-k adds none) over the whole call. With --deepgemm and --flashmla,
// also the chain of the anchors' stages on the same inputs: DeepGEMM's scorer, our top-k and
// FlashMLA's BF16 kernel (row "... baseline=anchor_stages", the sum of the three).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/device_random.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/pipeline.h"
#include "fp8dsa/topk.h"
#include "deepgemm_anchor.h"
#include "indexer_inputs.h"
#include "op_benches.h"
#include "sparse_mla_common.h"

namespace fp8dsa::bench {
namespace {

constexpr int64_t kTokens = 4096;
constexpr int64_t kCachedKeys = 28672;
constexpr int kIndexHeads = 64;
constexpr int kIndexDim = 128;
constexpr int kHeads = 128;
constexpr int kTopk = 2048;
constexpr int kDimQk = 576;
constexpr int kDimV = 512;

struct PrefillInputs {
  tools::DeviceBytes index_q, index_w, index_k, index_k_scale, q, kv;
};

// base with the indexer's and the attention's inputs from `in`.
PrefillParams with_inputs(const PrefillParams& base, const PrefillInputs& in) {
  PrefillParams p = base;
  p.indexer.q = in.index_q.get();
  p.indexer.w = in.index_w.as<float>();
  p.indexer.k = in.index_k.get();
  p.indexer.k_scale = in.index_k_scale.as<float>();
  p.attention.q = in.q.get();
  p.attention.kv = in.kv.get();
  return p;
}

// The anchors' chain on the inputs `in`: DeepGEMM's time for its scorer on this case (its own
// inputs of the shape: the scorer's time does not depend on the values), our top-k timed on our
// scorer's logits, and FlashMLA on the rows that top-k selected. Adds the row `ours` (the unfused
// prefill's) + " baseline=anchor_stages" with their sum, and our speedup over it to row `ours_at`.
Status bench_anchor_stages(const BenchContext& ctx, const PrefillInputs& in, const PrefillParams& base,
                           const tools::CausalBounds& bounds, size_t ours_at, double flops) {
  const int64_t num_keys = bounds.num_keys;
  ResultRow row = ctx.results->row(ours_at);
  row.shape += " baseline=anchor_stages";
  row.vs_anchor = NAN;
  row.tflops = row.gbps = NAN;
  const auto refuse = [&](const Status& s) {
    row.ms = NAN;
    row.note = s.to_string();
    ctx.results->add(row);
    return Status::ok();
  };

  double deepgemm_ms = NAN;
  const Status dg = time_deepgemm_case(ctx.deepgemm, kTokens, num_keys, kIndexHeads, std::max(ctx.timing.reps, 10),
                                       &deepgemm_ms);
  if (!dg.is_ok()) return refuse(dg);

  // Our scorer's logits, then our top-k on them (timed), as the unfused prefill runs its stages.
  tools::DeviceBuffer<float> logits;
  FP8DSA_RETURN_IF_ERROR(logits.allocate(static_cast<size_t>(kTokens) * static_cast<size_t>(num_keys)));
  IndexerParams ip = with_inputs(base, in).indexer;
  ip.logits = logits.get();
  ip.stream = ctx.stream;
  FP8DSA_RETURN_IF_ERROR(indexer_logits(ip));
  tools::DeviceBuffer<int32_t> indices;
  FP8DSA_RETURN_IF_ERROR(indices.allocate(static_cast<size_t>(kTokens) * kTopk));
  TopkParams tp;
  tools::DeviceBytes topk_workspace;
  FP8DSA_RETURN_IF_ERROR(topk_of_logits(ip, logits.get(), kTopk, indices.get(), &topk_workspace, &tp));
  tools::Timing topk_timing;
  FP8DSA_RETURN_IF_ERROR(tools::time_launches(ctx.stream, 1, ctx.timing, [&](int) { return topk(tp); }, &topk_timing));

  // FlashMLA on the selected rows, from the bf16 values of our e4m3 q and kv.
  std::vector<uint8_t> q8, kv8;
  std::vector<int32_t> selected;
  FP8DSA_RETURN_IF_ERROR(in.q.download(&q8));
  FP8DSA_RETURN_IF_ERROR(in.kv.download(&kv8));
  FP8DSA_RETURN_IF_ERROR(indices.download(&selected));
  const std::vector<uint16_t> q16 = bf16_of_e4m3(q8), kv16 = bf16_of_e4m3(kv8);
  FlashMlaInputs fm{kTokens, num_keys, kHeads, kTopk, base.attention.sm_scale, &q16, &kv16, &selected};
  double flashmla_ms = NAN;
  std::vector<uint16_t> fm_out;
  std::vector<float> fm_lse, fm_max_logits;
  const Status fs = run_flashmla_io(ctx, fm, &flashmla_ms, &fm_out, &fm_lse, &fm_max_logits);
  if (!fs.is_ok()) return refuse(fs);

  char kernel[256];
  std::snprintf(kernel, sizeof(kernel), "DeepGEMM mqa %.3f + fp8dsa top-k %.3f + FlashMLA BF16 %.3f ms", deepgemm_ms,
                topk_timing.median_ms, flashmla_ms);
  row.kernel = kernel;
  row.ms = deepgemm_ms + topk_timing.median_ms + flashmla_ms;
  row.tflops = flops / (row.ms * 1e-3) / 1e12;
  if (std::isfinite(ctx.results->row(ours_at).ms)) ctx.results->row(ours_at).vs_anchor = row.ms / ctx.results->row(ours_at).ms;
  ctx.results->add(row);
  return Status::ok();
}

}  // namespace

Status run_pipeline_bench(const BenchContext& ctx) {
  tools::CausalBounds bounds;
  FP8DSA_RETURN_IF_ERROR(tools::upload_causal_bounds(kTokens, kCachedKeys, &bounds));
  const int64_t num_keys = bounds.num_keys;

  const size_t index_q_bytes = static_cast<size_t>(kTokens) * kIndexHeads * kIndexDim;
  const size_t index_w_count = static_cast<size_t>(kTokens) * kIndexHeads;
  const size_t index_k_bytes = static_cast<size_t>(num_keys) * kIndexDim;
  const size_t q_bytes = static_cast<size_t>(kTokens) * kHeads * kDimQk;
  const size_t kv_bytes = static_cast<size_t>(num_keys) * kDimQk;
  const size_t set_bytes = index_q_bytes + 4 * index_w_count + index_k_bytes + 4 * num_keys + q_bytes + kv_bytes;
  const int sets = tools::rotation_sets(set_bytes, ctx.l2_bytes, 4);

  std::vector<PrefillInputs> inputs(static_cast<size_t>(sets));
  for (int s = 0; s < sets; ++s) {
    PrefillInputs& in = inputs[static_cast<size_t>(s)];
    const uint64_t seed = ctx.seed + 300 + 8 * static_cast<uint64_t>(s);
    FP8DSA_RETURN_IF_ERROR(in.index_q.allocate(index_q_bytes));
    FP8DSA_RETURN_IF_ERROR(in.index_w.allocate(4 * index_w_count));
    FP8DSA_RETURN_IF_ERROR(in.index_k.allocate(index_k_bytes));
    FP8DSA_RETURN_IF_ERROR(in.index_k_scale.allocate(4 * static_cast<size_t>(num_keys)));
    FP8DSA_RETURN_IF_ERROR(in.q.allocate(q_bytes));
    FP8DSA_RETURN_IF_ERROR(in.kv.allocate(kv_bytes));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.index_q.get(), index_q_bytes, seed + 1, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_uniform(in.index_w.as<float>(), index_w_count, seed + 2, -1.0f, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.index_k.get(), index_k_bytes, seed + 3, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(
        tools::fill_random_uniform(in.index_k_scale.as<float>(), static_cast<size_t>(num_keys), seed + 4, 0.5f, 1.5f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.q.get(), q_bytes, seed + 5, 1.0f, ctx.stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(in.kv.get(), kv_bytes, seed + 6, 1.0f, ctx.stream));
  }
  tools::DeviceBytes out, lse, max_logits;
  FP8DSA_RETURN_IF_ERROR(out.allocate(static_cast<size_t>(kTokens) * kHeads * kDimV * 2));
  FP8DSA_RETURN_IF_ERROR(lse.allocate(static_cast<size_t>(kTokens) * kHeads * sizeof(float)));
  FP8DSA_RETURN_IF_ERROR(max_logits.allocate(static_cast<size_t>(kTokens) * kHeads * sizeof(float)));

  PrefillParams base;
  base.indexer.num_tokens = kTokens;
  base.indexer.num_keys = num_keys;
  base.indexer.num_heads = kIndexHeads;
  base.indexer.head_dim = kIndexDim;
  base.indexer.ks = bounds.ks.as<int32_t>();
  base.indexer.ke = bounds.ke.as<int32_t>();
  base.attention.num_tokens = kTokens;
  base.attention.num_kv = num_keys;
  base.attention.num_heads = kHeads;
  base.attention.d_qk = kDimQk;
  base.attention.d_v = kDimV;
  base.attention.sm_scale = 1.0f / std::sqrt(192.0f);
  base.attention.out = out.get();
  base.attention.lse = lse.as<float>();
  base.attention.max_logits = max_logits.as<float>();
  base.topk = kTopk;
  base.stream = ctx.stream;
  // Every token sees more than topk keys, so the top-k fills all topk slots with valid rows.
  const double flops = 2.0 * kIndexHeads * kIndexDim * static_cast<double>(bounds.valid_pairs) +
                       2.0 * kHeads * (kDimQk + kDimV) * static_cast<double>(kTokens) * kTopk;
  // Unfused (logits in the workspace), unfused in chunks of 512 tokens (one chunk's logits) and
  // fused (candidates only), on the same inputs.
  constexpr int64_t kChunk = 512;
  for (int mode = 0; mode < 3; ++mode) {
    const bool fused = mode == 2;
    base.fused = fused;
    base.selection_chunk_tokens = mode == 1 ? kChunk : 0;
    tools::DeviceBytes workspace;
    FP8DSA_RETURN_IF_ERROR(workspace.allocate(prefill_workspace_bytes(base)));
    base.workspace = workspace.get();
    base.workspace_bytes = workspace.bytes();

    ResultRow row;
    row.op = "pipeline";
    const std::string suffix = fused ? "causal fused" : mode == 1 ? "causal chunked" + std::to_string(kChunk) : "causal";
    const std::string selection =
        fused ? " fused topk" : mode == 1 ? " + topk, " + std::to_string(kChunk) + " tokens at a time" : " + topk";
    row.shape = shape_string({{"T", kTokens}, {"N", num_keys}, {"h", kHeads}, {"H", kIndexHeads}, {"topk", kTopk}},
                             suffix.c_str());
    row.kernel = std::string("indexer:") + indexer_kernel_name(indexer_route(base.indexer)) + selection + " + sparse_mla:" +
                 sparse_mla_kernel_name(sparse_mla_route(base.attention)) + " (workspace " +
                 std::to_string(workspace.bytes() >> 20) + " MiB)";
    auto launch = [&](int s) { return prefill(with_inputs(base, inputs[static_cast<size_t>(s)])); };
    const size_t at = ctx.results->rows().size();
    FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, sets, launch, std::move(row),
                                           [&](double seconds, ResultRow& r) { r.tflops = flops / seconds / 1e12; }));
    if (mode == 0 && !ctx.deepgemm.empty() && !ctx.flashmla.empty() && at < ctx.results->rows().size()) {
      FP8DSA_RETURN_IF_ERROR(bench_anchor_stages(ctx, inputs[0], base, bounds, at, flops));
    }
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
