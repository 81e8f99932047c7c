// Public fused score + top-k: the workspace cut into the candidate buffers and the two launches
// (params.cpp has the checks and the workspace query, config.h the key splits).
#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "core/no_throw.h"
#include "fp8dsa/fused_topk.h"
#include "fp8dsa/indexer.h"
#include "fused_topk/candidate_layout.h"
#include "fused_topk/config.h"
#include "fused_topk/launch.h"
#include "fused_topk/params.h"

namespace fp8dsa {
namespace detail::fused_topk {

int choose_key_splits(const IndexerParams& scores) {
  return choose_key_splits(scores.num_tokens, scores.num_keys, scores.num_heads, device_sm_count());
}

Status launch_candidate_scorer(const IndexerParams& scores, const CandidateBuffers& buffers, int k) {
  return scores.head_dim == 64 ? launch_candidate_scorer_d64(scores, buffers, k)
                               : launch_candidate_scorer_d128(scores, buffers, k);
}

}  // namespace detail::fused_topk

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
