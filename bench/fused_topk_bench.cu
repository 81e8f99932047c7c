// Fused score + top-k: T new tokens over N - T cached keys (causal), k = 2048 (T = 4096: a prefill
// chunk; T = 64: its tail, or decode with MTP, where key splits and their merge carry the work),
// beside the unfused path on the same inputs in the same run (indexer + top-k with its [T, N] logits),
// the indexer alone (the floor is a ratio to it) and the top-k alone on those logits (add it to
// DeepGEMM's scoring time for "DeepGEMM + our top-k"). TFLOPS count the scorer's valid pairs.
// After timing, the fused and unfused index sets are compared row by row.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdio>
#include <vector>

#include "tools/device_buffer.h"
#include "tools/device_random.h"
#include "tools/timing.h"
#include "fp8dsa/fused_topk.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/topk.h"
#include "indexer_inputs.h"
#include "pipeline/params.h"
#include "op_benches.h"

namespace fp8dsa::bench {
namespace {

constexpr int kHeadDim = 128;
constexpr int kTopk = 2048;

// Rows whose index sets differ between two [T, k] outputs, and how many of those differ only by
// keys that tie with the selection's lowest score (either answer is right).
Status count_set_mismatches(const tools::DeviceBytes& a, const tools::DeviceBytes& b, const tools::DeviceBytes& logits,
                            int64_t num_tokens, int64_t num_keys, int64_t* rows_differing, int64_t* rows_tied) {
  std::vector<int32_t> ha(static_cast<size_t>(num_tokens) * kTopk), hb(ha.size());
  if (cudaMemcpy(ha.data(), a.get(), ha.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(hb.data(), b.get(), hb.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return {StatusCode::kCudaError, "fused_topk bench: copying the indices back failed"};
  }
  *rows_differing = 0;
  *rows_tied = 0;
  std::vector<float> row_logits(static_cast<size_t>(num_keys));
  for (int64_t t = 0; t < num_tokens; ++t) {
    auto ra = ha.begin() + t * kTopk, rb = hb.begin() + t * kTopk;
    std::sort(ra, ra + kTopk);
    std::sort(rb, rb + kTopk);
    if (std::equal(ra, ra + kTopk, rb)) continue;
    ++*rows_differing;
    if (cudaMemcpy(row_logits.data(), logits.as<float>() + t * num_keys, row_logits.size() * 4,
                   cudaMemcpyDeviceToHost) != cudaSuccess) {
      return {StatusCode::kCudaError, "fused_topk bench: copying a logits row back failed"};
    }
    auto score = [&](int32_t i) { return i >= 0 ? row_logits[static_cast<size_t>(i)] : -INFINITY; };
    float lowest = INFINITY;
    for (auto it = ra; it != ra + kTopk; ++it) lowest = std::min(lowest, score(*it));
    std::vector<int32_t> only;
    std::set_symmetric_difference(ra, ra + kTopk, rb, rb + kTopk, std::back_inserter(only));
    bool tied = true;
    for (int32_t i : only) tied = tied && score(i) == lowest;
    *rows_tied += tied;
  }
  return Status::ok();
}

Status bench_fused_shape(const BenchContext& ctx, int64_t num_tokens, int64_t num_keys, int num_heads) {
  tools::CausalBounds bounds;
  FP8DSA_RETURN_IF_ERROR(tools::upload_causal_bounds(num_tokens, num_keys - num_tokens, &bounds));
  std::vector<IndexerInputs> inputs;
  FP8DSA_RETURN_IF_ERROR(make_indexer_inputs(ctx, num_tokens, num_keys, num_heads, kHeadDim, &inputs));
  const int sets = static_cast<int>(inputs.size());

  const IndexerParams scores = causal_indexer_shape(ctx, num_tokens, num_keys, num_heads, kHeadDim, bounds);

  tools::DeviceBytes fused_indices, unfused_indices, fused_workspace, logits, topk_workspace;
  FP8DSA_RETURN_IF_ERROR(fused_indices.allocate(static_cast<size_t>(num_tokens) * kTopk * sizeof(int32_t)));
  FP8DSA_RETURN_IF_ERROR(unfused_indices.allocate(static_cast<size_t>(num_tokens) * kTopk * sizeof(int32_t)));
  FusedTopkParams fused;
  fused.scores = scores;
  fused.select.k = kTopk;
  fused.select.indices = fused_indices.as<int32_t>();
  fused.stream = ctx.stream;
  FP8DSA_RETURN_IF_ERROR(fused_workspace.allocate(fused_topk_workspace_bytes(fused)));
  fused.workspace = fused_workspace.get();
  fused.workspace_bytes = fused_workspace.bytes();

  // The unfused path: logits [T, N] (N is a multiple of 4 here), then the top-k.
  FP8DSA_RETURN_IF_ERROR(logits.allocate(static_cast<size_t>(num_tokens) * num_keys * sizeof(float)));
  IndexerParams indexer = scores;
  indexer.logits = logits.as<float>();
  TopkParams select;
  FP8DSA_RETURN_IF_ERROR(
      topk_of_logits(scores, logits.as<float>(), kTopk, unfused_indices.as<int32_t>(), &topk_workspace, &select));

  const std::string shape = shape_string({{"T", num_tokens}, {"N", num_keys}, {"H", num_heads}, {"k", kTopk}}, "causal");
  const auto flops = [&](double seconds, ResultRow& r) {
    r.tflops = 2.0 * num_heads * kHeadDim * static_cast<double>(bounds.valid_pairs) / seconds / 1e12;
  };
  ResultRow row;
  row.op = "fused_topk";
  row.shape = shape;
  row.kernel = "q_resident candidates + select (workspace " + std::to_string(fused_workspace.bytes() >> 20) + " MiB)";
  FP8DSA_RETURN_IF_ERROR(time_and_record(
      ctx, sets,
      [&](int s) {
        FusedTopkParams p = fused;
        p.scores = inputs[static_cast<size_t>(s)].params(scores);
        return fused_topk(p);
      },
      row, flops));

  row.shape = shape + " baseline=unfused";
  row.kernel = "indexer + topk (logits " + std::to_string((size_t{4} * num_tokens * num_keys) >> 20) + " MiB)";
  FP8DSA_RETURN_IF_ERROR(time_and_record(
      ctx, sets,
      [&](int s) {
        FP8DSA_RETURN_IF_ERROR(indexer_logits(inputs[static_cast<size_t>(s)].params(indexer)));
        return topk(select);
      },
      row, flops));

  // The unfused path in token chunks, as prefill() runs it where its workspace holds the logits of
  // some tokens only (pipeline/params.h: select_in_chunks): one [chunk, N] logits buffer.
  tools::DeviceBytes chunked_indices, chunk_logits, chunk_topk_workspace;
  FP8DSA_RETURN_IF_ERROR(chunked_indices.allocate(static_cast<size_t>(num_tokens) * kTopk * sizeof(int32_t)));
  for (int64_t chunk : {256, 512, 1024}) {
    if (chunk >= num_tokens) continue;
    FP8DSA_RETURN_IF_ERROR(chunk_logits.allocate(static_cast<size_t>(chunk) * num_keys * sizeof(float)));
    TopkParams chunk_select = select;
    chunk_select.logits = chunk_logits.as<float>();
    chunk_select.indices = chunked_indices.as<int32_t>();
    chunk_select.num_rows = chunk;
    TopkParams last = chunk_select;
    last.num_rows = num_tokens % chunk;
    const size_t topk_bytes =
        std::max(topk_workspace_bytes(chunk_select), last.num_rows > 0 ? topk_workspace_bytes(last) : size_t{0});
    FP8DSA_RETURN_IF_ERROR(chunk_topk_workspace.allocate(topk_bytes));
    chunk_select.workspace = chunk_topk_workspace.get();
    chunk_select.workspace_bytes = topk_bytes;
    IndexerParams chunk_indexer = indexer;
    chunk_indexer.logits = chunk_logits.as<float>();
    row.shape = shape + " baseline=unfused_chunk" + std::to_string(chunk);
    row.kernel = "indexer + topk, " + std::to_string(chunk) + " tokens at a time (logits " +
                 std::to_string((size_t{4} * chunk * num_keys) >> 20) + " MiB)";
    FP8DSA_RETURN_IF_ERROR(time_and_record(
        ctx, sets,
        [&](int s) {
          return detail::pipeline::select_in_chunks(inputs[static_cast<size_t>(s)].params(chunk_indexer), chunk_select,
                                                    chunk);
        },
        row, flops));
    // The same sets as the whole batch's on the first input set (ties aside).
    FP8DSA_RETURN_IF_ERROR(detail::pipeline::select_in_chunks(inputs[0].params(chunk_indexer), chunk_select, chunk));
    FP8DSA_RETURN_IF_ERROR(indexer_logits(inputs[0].params(indexer)));
    FP8DSA_RETURN_IF_ERROR(topk(select));
    int64_t differing = 0, tied = 0;
    FP8DSA_RETURN_IF_ERROR(
        count_set_mismatches(chunked_indices, unfused_indices, logits, num_tokens, num_keys, &differing, &tied));
    std::printf("  fused_topk %s: chunks of %lld tokens: %lld of %lld rows differ from the whole batch's sets, %lld "
                "of them only by keys tied at the lowest selected score\n",
                shape.c_str(), static_cast<long long>(chunk), static_cast<long long>(differing),
                static_cast<long long>(num_tokens), static_cast<long long>(tied));
  }

  row.shape = shape + " baseline=indexer_alone";
  row.kernel = indexer_kernel_name(indexer_route(indexer));
  FP8DSA_RETURN_IF_ERROR(time_and_record(
      ctx, sets, [&](int s) { return indexer_logits(inputs[static_cast<size_t>(s)].params(indexer)); }, row, flops));

  row.shape = shape + " baseline=topk_alone";
  row.kernel = "fp8dsa::topk on the causal logits";
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, 1, [&](int) { return topk(select); }, row, [&](double seconds, ResultRow& r) {
    r.gbps = 4.0 * static_cast<double>(bounds.valid_pairs) / seconds / 1e9;
  }));

  // The same inputs through both paths: the index sets must agree (ties aside).
  FusedTopkParams first = fused;
  first.scores = inputs[0].params(scores);
  FP8DSA_RETURN_IF_ERROR(fused_topk(first));
  FP8DSA_RETURN_IF_ERROR(indexer_logits(inputs[0].params(indexer)));
  FP8DSA_RETURN_IF_ERROR(topk(select));
  int64_t differing = 0, tied = 0;
  FP8DSA_RETURN_IF_ERROR(
      count_set_mismatches(fused_indices, unfused_indices, logits, num_tokens, num_keys, &differing, &tied));
  std::printf("  fused_topk %s: %lld of %lld rows differ from the unfused sets, %lld of them only by keys tied at the "
              "lowest selected score\n",
              shape.c_str(), static_cast<long long>(differing), static_cast<long long>(num_tokens),
              static_cast<long long>(tied));
  return Status::ok();
}

}  // namespace

Status run_fused_topk_bench(const BenchContext& ctx) {
  const std::vector<int64_t> keys =
      ctx.quick ? std::vector<int64_t>{65536} : std::vector<int64_t>{8192, 32768, 65536, 131072};
  const std::vector<int> heads = ctx.quick ? std::vector<int>{64} : std::vector<int>{64, 32};
  for (int64_t n : keys) {
    for (int h : heads) FP8DSA_RETURN_IF_ERROR(bench_fused_shape(ctx, 4096, n, h));
  }
  if (!ctx.quick) {
    for (int64_t n : {65536, 131072}) FP8DSA_RETURN_IF_ERROR(bench_fused_shape(ctx, 64, n, 64));
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
