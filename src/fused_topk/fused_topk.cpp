// Public fused score + top-k: argument checks, the workspace plan and the two launches.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/cuda_check.h"
#include "core/no_throw.h"
#include "core/validate.h"
#include "fp8dsa/fused_topk.h"
#include "fp8dsa/indexer.h"
#include "fused_topk/candidate_layout.h"
#include "fused_topk/launch.h"
#include "indexer/key_splits.h"

namespace fp8dsa {
namespace detail::fused_topk {
namespace {

// The stage params the fused call stands for, with a placeholder where the unfused call would
// have its logits: the shared checks then run exactly as they do for the two stages.
alignas(16) float placeholder_logits[4];

IndexerParams scorer_params(const FusedTopkParams& params) {
  IndexerParams s = params.scores;
  s.logits = placeholder_logits;
  // As if the rows were padded to the scorer's 16-byte rule (there are no rows).
  s.ldl = s.num_keys >= 0 && s.num_keys <= detail::kMaxExtent ? logits_row_stride(s.num_keys) : 0;
  s.fill_masked = false;
  s.stream = params.stream;
  return s.resolved();
}

TopkParams select_params(const FusedTopkParams& params) {
  TopkParams t = params.select;
  t.num_rows = params.scores.num_tokens;
  t.num_keys = params.scores.num_keys;
  t.ks = params.scores.ks;
  t.ke = params.scores.ke;
  t.logits = placeholder_logits;
  t.ldl = 0;
  t.workspace = nullptr;
  t.workspace_bytes = 0;
  t.stream = params.stream;
  return t.resolved();
}

}  // namespace

// Key splits: at most as many as keep every token block's CTAs within one wave of one CTA per SM
// (the scorer runs one per SM). Unlike the plain scorer (about four CTAs per SM), every split here
// costs its own candidate buffers and compactions: H200, T = 4096, N = 65536, H = 64 (512 token
// blocks): 1 split 7.03 ms, 2 splits 7.65 ms, 4 splits 10.06 ms; and a split past one wave costs a
// second one: T = 64, N = 65536 (8 blocks): 16 splits (128 CTAs) 0.300 ms, 17 (136) 0.395 ms.
// At least 8 key tiles per split.
int choose_key_splits(const IndexerParams& scores) {
  const int block_tokens = detail::indexer::q_resident_auto_block_tokens(scores.num_heads);
  const int64_t blocks = (scores.num_tokens + block_tokens - 1) / block_tokens;
  const int64_t sms = device_sm_count();
  if (sms <= 0 || blocks >= sms) return 1;
  const int64_t by_keys = std::max<int64_t>(1, (scores.num_keys + 64 * 8 - 1) / (64 * 8));
  return static_cast<int>(std::clamp<int64_t>(sms / blocks, 1, std::min<int64_t>(kMaxKeySplits, by_keys)));
}

Status launch_candidate_scorer(const IndexerParams& scores, const CandidateBuffers& buffers, int k) {
  return scores.head_dim == 64 ? launch_candidate_scorer_d64(scores, buffers, k)
                               : launch_candidate_scorer_d128(scores, buffers, k);
}

}  // namespace detail::fused_topk

Status validate(const FusedTopkParams& params) {
  constexpr const char* kOp = "fused_topk";
  const IndexerKernel kernel = params.scores.kernel;
  if (kernel != IndexerKernel::kAuto && kernel != IndexerKernel::kQResident) {
    return invalid_argument(std::string(kOp) + ": scores.kernel is " + indexer_kernel_name(kernel) +
                            "; the fused path runs the Q-resident scorer (kAuto or kQResident)");
  }
  // The two stage checks build their messages with std::string: they may throw bad_alloc.
  return detail::no_throw(kOp, [&] {
    for (const Status& s : {validate(detail::fused_topk::scorer_params(params)),
                            validate(detail::fused_topk::select_params(params))}) {
      if (!s.is_ok()) return Status{s.code(), std::string(kOp) + ": " + s.message()};
    }
    return Status::ok();
  });
}

Status fused_topk_workspace_bytes(const FusedTopkParams& params, size_t* bytes) {
  return detail::no_throw("fused_topk_workspace_bytes", [&] {
    using namespace detail;
    constexpr const char* kOp = "fused_topk_workspace_bytes";
    if (bytes == nullptr) return invalid_argument("fused_topk_workspace_bytes: bytes must not be null");
    const IndexerParams& s = params.scores;
    FP8DSA_RETURN_IF_ERROR(check_size(kOp, "scores.num_tokens", s.num_tokens));
    FP8DSA_RETURN_IF_ERROR(check_size(kOp, "scores.num_keys", s.num_keys));
    FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "scores.num_heads", s.num_heads, {4, 8, 16, 32, 64}));
    FP8DSA_RETURN_IF_ERROR(check_range(kOp, "select.k", params.select.k, 1, 2048));
    *bytes = s.num_tokens == 0 || s.num_keys == 0
                 ? 0
                 : detail::fused_topk::candidate_layout(s.num_tokens, detail::fused_topk::choose_key_splits(s),
                                                     params.select.k)
                       .total;
    return Status::ok();
  });
}

size_t fused_topk_workspace_bytes(const FusedTopkParams& params) {
  size_t bytes = 0;
  return fused_topk_workspace_bytes(params, &bytes).is_ok() ? bytes : std::numeric_limits<size_t>::max();
}

namespace {

Status fused_topk_unguarded(const FusedTopkParams& params) {
  using namespace detail::fused_topk;
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  const IndexerParams scores = scorer_params(params);
  const TopkParams out = select_params(params);
  if (scores.num_tokens == 0) return Status::ok();
  CandidateBuffers buffers;
  if (scores.num_keys > 0) {
    const size_t need = fused_topk_workspace_bytes(params);
    if (params.workspace_bytes < need || params.workspace == nullptr) {
      return {StatusCode::kWorkspaceTooSmall,
              "fused_topk: workspace_bytes (" + std::to_string(params.workspace_bytes) +
                  (params.workspace == nullptr ? ", workspace null" : "") +
                  ") is below fused_topk_workspace_bytes() (" + std::to_string(need) + ")"};
    }
    if (reinterpret_cast<uintptr_t>(params.workspace) % kWorkspaceAlignment != 0) {
      return invalid_argument("fused_topk: workspace must be " + std::to_string(kWorkspaceAlignment) +
                              "-byte aligned");
    }
    buffers.splits = choose_key_splits(scores);
    const CandidateLayout layout = candidate_layout(scores.num_tokens, buffers.splits, out.k);
    auto* base = static_cast<uint8_t*>(params.workspace);
    buffers.counts = reinterpret_cast<uint32_t*>(base + layout.counts_offset);
    buffers.entries = reinterpret_cast<uint2*>(base + layout.entries_offset);
    buffers.capacity = layout.capacity;
    IndexerParams run = scores;
    run.logits = nullptr;
    FP8DSA_RETURN_IF_ERROR(launch_candidate_scorer(run, buffers, out.k));
  }
  return launch_select_candidates(out, buffers);
}

}  // namespace

Status fused_topk(const FusedTopkParams& params) {
  return detail::no_throw("fused_topk", [&] { return fused_topk_unguarded(params); });
}

}  // namespace fp8dsa
