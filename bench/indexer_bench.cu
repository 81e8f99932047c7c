// Indexer scoring: one sequence of T = 4096 new tokens over N - 4096 cached keys (causal), the
// DeepSeek-V3.2 prefill shape. FLOPs count valid (token, key) pairs only: 2 * H * D each. With
// --deepgemm, each shape also runs on DeepGEMM's own dumped inputs beside DeepGEMM's time for them
// (deepgemm_anchor.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tools/device_random.h"
#include "fp8dsa/indexer.h"
#include "deepgemm_anchor.h"
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
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, sets, launch_filled, std::move(fill_row), derive));
  if (num_heads != 64) return Status::ok();
  // H = 64: the split epilogue (IndexerParams::split_epilogue), row "... causal split".
  IndexerParams split = base;
  split.split_epilogue = true;
  ResultRow split_row = row;
  split_row.shape += " split";
  split_row.kernel = indexer_kernel_name(indexer_route(split));
  auto launch_split = [&](int s) { return indexer_logits(inputs[static_cast<size_t>(s)].params(split)); };
  return time_and_record(ctx, sets, launch_split, std::move(split_row), derive);
}

// Our scorer against DeepGEMM's logits of the same case: the largest difference over the cells
// both hold, relative to the largest |logit|, and the cells where one is -inf and the other not.
void print_deepgemm_agreement(const std::string& shape, const DeepgemmCase& c, const std::vector<float>& ours) {
  double max_diff = 0.0, max_ref = 0.0;
  long long mask_mismatches = 0;
  for (int64_t t = 0; t < c.num_tokens; ++t) {
    const float* theirs = c.logits.data() + t * c.stride;
    const float* mine = ours.data() + t * c.num_keys;
    for (int64_t n = 0; n < c.num_keys; ++n) {
      const bool a = std::isfinite(theirs[n]), b = std::isfinite(mine[n]);
      if (a != b) {
        ++mask_mismatches;
      } else if (a) {
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(theirs[n]) - mine[n]));
        max_ref = std::max(max_ref, std::fabs(static_cast<double>(theirs[n])));
      }
    }
  }
  std::printf("  deepgemm inputs %s: max |ours - DeepGEMM| / max |logit| = %.2e, -inf mismatches %lld\n",
              shape.c_str(), max_ref > 0.0 ? max_diff / max_ref : 0.0, mask_mismatches);
}

// The shape on DeepGEMM's dumped inputs (rows "... causal data=deepgemm", plain and fill), then
// DeepGEMM's own time on the same dumped bytes beside each (the same shape + " baseline=deepgemm";
// both on one input set; DeepGEMM's kernel writes only the cells in [ks, ke) and needs no fill
// pass, so its fill row has the same time). A failing anchor is recorded as a row with its message.
Status bench_on_deepgemm_inputs(const BenchContext& ctx, int64_t num_keys, int num_heads) {
  ResultRow row;
  row.op = "indexer";
  row.shape = shape_string({{"T", kTokens}, {"N", num_keys}, {"H", num_heads}}, "causal") + " data=deepgemm";
  DeepgemmCase c;
  // DeepGEMM's first timing writes the dump it times (--dump --time), and ours runs on what it wrote.
  const std::string dump_dir = ctx.anchor_dir + "/deepgemm_dump";
  const int anchor_iters = std::max(ctx.timing.reps, 10);
  std::vector<double> anchor_ms;
  double first_ms = NAN;
  Status timed = time_deepgemm_dump(ctx.deepgemm, dump_dir, kTokens, num_keys, num_heads, anchor_iters, &first_ms);
  if (timed.is_ok()) anchor_ms.push_back(first_ms);
  Status got = timed.is_ok() ? read_deepgemm_case(dump_dir, kTokens, num_keys, num_heads, &c)
                             : dump_deepgemm_case(ctx.deepgemm, dump_dir, kTokens, num_keys, num_heads, &c);
  if (!got.is_ok()) {
    row.note = got.to_string();
    ctx.results->add(row);
    return Status::ok();
  }
  // The dump's bounds (causal, as ours) in the form causal_indexer_shape takes.
  tools::CausalBounds bounds;
  bounds.num_tokens = kTokens;
  bounds.num_keys = num_keys;
  for (int64_t t = 0; t < kTokens; ++t) {
    const int64_t lo = std::clamp<int64_t>(c.ks[static_cast<size_t>(t)], 0, num_keys);
    const int64_t hi = std::clamp<int64_t>(c.ke[static_cast<size_t>(t)], 0, num_keys);
    bounds.valid_pairs += std::max<int64_t>(hi - lo, 0);
  }
  FP8DSA_RETURN_IF_ERROR(tools::upload(c.ks, &bounds.ks));
  FP8DSA_RETURN_IF_ERROR(tools::upload(c.ke, &bounds.ke));
  // One copy of the inputs, as DeepGEMM's --time runs on one: the two are timed on the same bytes
  // in the same state of the cache.
  const size_t bytes = c.q.size() + c.k.size() + 4 * (c.w.size() + c.k_scale.size());
  std::vector<IndexerInputs> sets(1);
  for (IndexerInputs& in : sets) {
    in.bytes = bytes;
    FP8DSA_RETURN_IF_ERROR(tools::upload(c.q, &in.q));
    FP8DSA_RETURN_IF_ERROR(tools::upload(c.w, &in.w));
    FP8DSA_RETURN_IF_ERROR(tools::upload(c.k, &in.k));
    FP8DSA_RETURN_IF_ERROR(tools::upload(c.k_scale, &in.k_scale));
  }
  tools::DeviceBuffer<float> logits;
  FP8DSA_RETURN_IF_ERROR(logits.allocate(static_cast<size_t>(kTokens) * static_cast<size_t>(num_keys)));

  IndexerParams base = causal_indexer_shape(ctx, kTokens, num_keys, num_heads, kDeepgemmHeadDim, bounds);
  base.logits = logits.get();
  IndexerParams filled = base;
  filled.fill_masked = true;
  row.kernel = indexer_kernel_name(indexer_route(base));

  // Agreement first, on the filled logits (DeepGEMM's dump holds -inf outside [ks, ke)).
  FP8DSA_RETURN_IF_ERROR(indexer_logits(sets[0].params(filled)));
  std::vector<float> ours;
  FP8DSA_RETURN_IF_ERROR(logits.download(&ours));
  print_deepgemm_agreement(row.shape, c, ours);
  c.logits = {};
  ours = {};

  const auto derive = [&](double seconds, ResultRow& r) {
    r.tflops = 2.0 * num_heads * kDeepgemmHeadDim * static_cast<double>(bounds.valid_pairs) / seconds / 1e12;
    r.gbps = (static_cast<double>(bytes) + 4.0 * static_cast<double>(bounds.valid_pairs)) / seconds / 1e9;
  };
  const int count = static_cast<int>(sets.size());
  const auto launch = [&](bool fill) {
    return [&, fill](int s) { return indexer_logits(sets[static_cast<size_t>(s)].params(fill ? filled : base)); };
  };
  // kRounds rounds of DeepGEMM, ours and ours with the fill in turn (ours with the fill first in odd
  // rounds); each row is the median of its rounds' medians, so that the clocks' drift over the
  // seconds this takes falls on the three alike (timed one after the other, a row of ours could
  // differ from DeepGEMM's by 2-5% for no reason of its own, and the row timed second ran 0.1-0.4 ms
  // slower at N >= 32K, H = 64: bench/journal/2026-12-02.md, tenth session;
  // bench/journal/2026-12-03.md, thirteenth; bench/journal/2026-12-04.md, fourteenth).
  constexpr int kRounds = 4;
  std::vector<double> ours_ms[2];
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {  // round 0's is the timing that wrote the dump
      double ms = NAN;
      const Status t = time_deepgemm_dump(ctx.deepgemm, dump_dir, kTokens, num_keys, num_heads, anchor_iters, &ms);
      if (t.is_ok()) {
        anchor_ms.push_back(ms);
      } else {
        timed = t;
      }
    }
    for (const bool second : {false, true}) {
      const bool fill = second != (round % 2 == 1);
      tools::Timing timing;
      const Status st = tools::time_launches(ctx.stream, count, ctx.timing, launch(fill), &timing);
      if (!st.is_ok()) {
        // Recorded as refused (or returned) the way every other row is.
        ResultRow refused = row;
        if (fill) refused.shape += " fill";
        return time_and_record(ctx, count, launch(fill), refused, derive);
      }
      ours_ms[fill ? 1 : 0].push_back(timing.median_ms);
    }
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? NAN : v[v.size() / 2];
  };
  const double anchor = median(anchor_ms);
  for (const bool fill : {false, true}) {
    ResultRow ours_row = row;
    if (fill) ours_row.shape += " fill";
    ours_row.ms = median(ours_ms[fill ? 1 : 0]);
    derive(ours_row.ms * 1e-3, ours_row);
    ResultRow anchor_row = ours_row;
    anchor_row.shape += " baseline=deepgemm";
    anchor_row.kernel = "DeepGEMM sm90_fp8_mqa_logits (sgl-deep-gemm 0.2.5), on the dumped bytes";
    if (anchor_ms.empty()) {
      anchor_row.note = timed.to_string();
      anchor_row.ms = anchor_row.tflops = anchor_row.gbps = NAN;
    } else {
      anchor_row.ms = anchor;
      derive(anchor * 1e-3, anchor_row);
      ours_row.vs_anchor = anchor / ours_row.ms;
    }
    ctx.results->add(ours_row);
    ctx.results->add(anchor_row);
  }
  return Status::ok();
}

}  // namespace

Status run_indexer_bench(const BenchContext& ctx) {
  const std::vector<int64_t> keys =
      ctx.quick ? std::vector<int64_t>{65536} : std::vector<int64_t>{8192, 32768, 65536, 131072};
  const std::vector<int> heads = ctx.quick ? std::vector<int>{64} : std::vector<int>{64, 32};
  for (int64_t n : keys) {
    for (int h : heads) {
      FP8DSA_RETURN_IF_ERROR(bench_indexer_shape(ctx, n, h));
      // The anchor takes H = 32 and 64 only.
      if (!ctx.deepgemm.empty() && (h == 32 || h == 64)) FP8DSA_RETURN_IF_ERROR(bench_on_deepgemm_inputs(ctx, n, h));
    }
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
