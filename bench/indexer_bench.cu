// Indexer scoring: one sequence of T = 4096 new tokens over N - 4096 cached keys (causal), the
// DeepSeek-V3.2 prefill shape. FLOPs count valid (token, key) pairs only: 2 * H * D each.
#include <vector>

#include "tools/device_random.h"
#include "fp8dsa/indexer.h"
#include "indexer_inputs.h"
#include "op_benches.h"

namespace fp8dsa::bench {
namespace {

constexpr int64_t kTokens = 4096;
constexpr int kHeadDim = 128;

Status bench_indexer_shape(const BenchContext& ctx, int64_t num_keys, int num_heads) {
  tools::CausalBounds bounds;
  FP8DSA_RETURN_IF_ERROR(tools::upload_causal_bounds(kTokens, num_keys - kTokens, &bounds));
  std::vector<IndexerInputs> inputs;
  FP8DSA_RETURN_IF_ERROR(make_indexer_inputs(ctx, kTokens, num_keys, num_heads, kHeadDim, &inputs));
  const int sets = static_cast<int>(inputs.size());
  tools::DeviceBytes logits;
  FP8DSA_RETURN_IF_ERROR(logits.allocate(static_cast<size_t>(kTokens) * num_keys * sizeof(float)));

  IndexerParams base = causal_indexer_shape(ctx, kTokens, num_keys, num_heads, kHeadDim, bounds);
  base.logits = logits.as<float>();

  ResultRow row;
  row.op = "indexer";
  row.shape = shape_string({{"T", kTokens}, {"N", num_keys}, {"H", num_heads}}, "causal");
  row.kernel = indexer_kernel_name(indexer_route(base));

  const auto derive = [&](double seconds, ResultRow& r) {
    r.tflops = 2.0 * num_heads * kHeadDim * static_cast<double>(bounds.valid_pairs) / seconds / 1e12;
    // Reads q, w, k, k_scale once; writes the valid logits.
    const double bytes = static_cast<double>(inputs[0].bytes) + 4.0 * static_cast<double>(bounds.valid_pairs);
    r.gbps = bytes / seconds / 1e9;
  };
  auto launch = [&](int s) { return indexer_logits(inputs[static_cast<size_t>(s)].params(base)); };
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, sets, launch, row, derive));
  // The same with the masked cells filled with -inf (the Python default, DeepGEMM's old
  // clean_logits): row "... causal fill".
  IndexerParams filled = base;
  filled.fill_masked = true;
  ResultRow fill_row = row;
  fill_row.shape += " fill";
  auto launch_filled = [&](int s) { return indexer_logits(inputs[static_cast<size_t>(s)].params(filled)); };
  return time_and_record(ctx, sets, launch_filled, std::move(fill_row), derive);
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
