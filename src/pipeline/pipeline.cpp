// The whole prefill: indexer scoring -> top-k -> sparse MLA on one stream, every intermediate in
// the caller's workspace. No allocation and no host synchronisation, so the call is graph
// capturable.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/cuda_check.h"
#include "core/no_throw.h"
#include "fp8dsa/fused_topk.h"
#include "fp8dsa/pipeline.h"
#include "pipeline/params.h"

namespace fp8dsa {
namespace {

// Every sub-buffer starts on a kWorkspaceAlignment (fp8dsa/types.h) boundary: TMA needs 16 bytes,
// vector loads and the top-k's own workspace contract want 256. The logits rows: min_logits_stride
// (fp8dsa/indexer.h; num_keys <= INT32_MAX after validate_shape, so it cannot overflow).

constexpr size_t kSizeOverflow = std::numeric_limits<size_t>::max();

// a * b * c with saturation: a shape too large for size_t reports "needs more than any workspace".
size_t checked_bytes(int64_t a, int64_t b, int64_t c) {
  if (a <= 0 || b <= 0 || c <= 0) return 0;
  const size_t ua = static_cast<size_t>(a), ub = static_cast<size_t>(b), uc = static_cast<size_t>(c);
  if (ua > kSizeOverflow / ub) return kSizeOverflow;
  const size_t ab = ua * ub;
  if (ab > kSizeOverflow / uc) return kSizeOverflow;
  return ab * uc;
}

size_t align_up(size_t bytes) {
  if (bytes > kSizeOverflow - (kWorkspaceAlignment - 1)) return kSizeOverflow;
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

size_t add_saturating(size_t a, size_t b) { return a > kSizeOverflow - b ? kSizeOverflow : a + b; }

// Where each intermediate lives inside the workspace (offsets from its start).
struct WorkspacePlan {
  int64_t chunk_tokens = 0;  // the unfused path's logits rows: tokens scored and selected at a time
  size_t logits_offset = 0;
  size_t logits_bytes = 0;  // 0 on the fused path
  int64_t logits_stride = 0;
  size_t indices_offset = 0;
  size_t indices_bytes = 0;
  size_t topk_offset = 0;
  size_t topk_bytes = 0;   // the unfused top-k's own workspace, or the fused path's candidates
  size_t total = 0;
};

// The top-k call of the unfused path, minus the workspace pointers (the size query depends on the
// shape only).
TopkParams topk_params_for(const PrefillParams& params, int64_t logits_stride, int64_t rows) {
  TopkParams topk;
  topk.num_rows = rows;
  topk.num_keys = params.indexer.num_keys;
  topk.logits_stride = logits_stride;
  topk.ks = params.indexer.ks;
  topk.ke = params.indexer.ke;
  topk.k = params.topk;
  topk.indices_stride = params.topk;
  topk.sorted = false;  // attention does not care about order
  topk.stream = params.stream;
  return topk;
}

// The fused score + top-k call, minus the indices and workspace pointers.
FusedTopkParams fused_params_for(const PrefillParams& params) {
  FusedTopkParams fused;
  fused.scores = params.indexer;
  fused.select.k = params.topk;
  fused.select.indices_stride = params.topk;
  fused.select.sorted = false;
  fused.stream = params.stream;
  return fused;
}

// The unfused path's chunk the params ask for: all T tokens, or selection_chunk_tokens of them.
int64_t requested_chunk(const PrefillParams& params) {
  const int64_t num_tokens = params.indexer.num_tokens;
  const int64_t chunk = params.selection_chunk_tokens;
  return chunk > 0 && chunk < num_tokens ? chunk : num_tokens;
}

// chunk_tokens: the unfused path's logits rows (ignored on the fused path).
WorkspacePlan plan_workspace(const PrefillParams& params, int64_t chunk_tokens) {
  WorkspacePlan plan;
  const int64_t num_tokens = params.indexer.num_tokens;
  size_t offset = 0;
  if (!params.fused) {
    plan.chunk_tokens = chunk_tokens;
    plan.logits_stride = min_logits_stride(params.indexer.num_keys);
    plan.logits_offset = offset;
    plan.logits_bytes = checked_bytes(chunk_tokens, plan.logits_stride, sizeof(float));
    offset = add_saturating(offset, align_up(plan.logits_bytes));
  }
  plan.indices_offset = offset;
  plan.indices_bytes = checked_bytes(num_tokens, params.topk, sizeof(int32_t));
  offset = add_saturating(offset, align_up(plan.indices_bytes));
  plan.topk_offset = offset;
  if (params.fused) {
    plan.topk_bytes = fused_topk_workspace_bytes(fused_params_for(params));
  } else {
    // The top-k's workspace depends on its row count, not monotonically (only few rows use one):
    // enough for a whole chunk and for the last, shorter one.
    plan.topk_bytes = topk_workspace_bytes(topk_params_for(params, plan.logits_stride, chunk_tokens));
    if (chunk_tokens > 0 && num_tokens % chunk_tokens != 0) {
      const TopkParams last_chunk = topk_params_for(params, plan.logits_stride, num_tokens % chunk_tokens);
      plan.topk_bytes = std::max(plan.topk_bytes, topk_workspace_bytes(last_chunk));
    }
  }
  offset = add_saturating(offset, align_up(plan.topk_bytes));
  plan.total = offset;
  return plan;
}

WorkspacePlan plan_workspace(const PrefillParams& params) { return plan_workspace(params, requested_chunk(params)); }

// The unfused stages 1 and 2, a chunk of plan.chunk_tokens tokens at a time.
Status score_then_select(const PrefillParams& params, const WorkspacePlan& plan, float* logits, int32_t* indices,
                         char* base) {
  IndexerParams indexer = params.indexer;
  indexer.logits = logits;
  indexer.logits_stride = plan.logits_stride;
  indexer.fill_masked = false;  // top-k reads only [ks, ke)
  indexer.stream = params.stream;
  TopkParams topk = topk_params_for(params, plan.logits_stride, plan.chunk_tokens);
  topk.logits = logits;
  topk.indices = indices;
  topk.workspace = plan.topk_bytes > 0 ? base + plan.topk_offset : nullptr;
  topk.workspace_bytes = plan.topk_bytes;
  return detail::pipeline::select_in_chunks(indexer, topk, plan.chunk_tokens);
}

// How prefill() selects (PrefillParams::fused): fused, or unfused in chunks of chunk_tokens.
struct Selection {
  bool fused = false;
  int64_t chunk_tokens = 0;
};

Selection choose_selection(const PrefillParams& params) {
  if (params.fused) return {true, 0};
  const int64_t wanted = requested_chunk(params);
  const auto fits = [&](int64_t chunk) { return params.workspace_bytes >= plan_workspace(params, chunk).total; };
  // An explicit chunk, or a workspace that holds the wanted one: as asked (a small workspace is
  // then reported as such).
  if (params.selection_chunk_tokens > 0 || fits(wanted)) return {false, wanted};
  // A large multiple of the step that fits: the plan grows with the chunk's logits, but the top-k's
  // workspace does not grow monotonically, so the search keeps only chunks checked to fit.
  if (wanted > kMinSelectionChunkTokens && fits(kMinSelectionChunkTokens)) {
    int64_t lo = kMinSelectionChunkTokens / kSelectionChunkStep, hi = (wanted - 1) / kSelectionChunkStep;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (fits(mid * kSelectionChunkStep)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return {false, lo * kSelectionChunkStep};
  }
  const bool scorer_allows = params.indexer.kernel == IndexerKernel::kAuto ||
                             params.indexer.kernel == IndexerKernel::kQResident;
  PrefillParams fused = params;
  fused.fused = true;
  if (scorer_allows && params.workspace_bytes >= plan_workspace(fused).total) return {true, 0};
  return {false, wanted};
}

Status workspace_too_large(const PrefillParams& params) {
  return invalid_argument("prefill: the workspace for T = " + std::to_string(params.indexer.num_tokens) +
                          ", N = " + std::to_string(params.indexer.num_keys) + ", topk = " +
                          std::to_string(params.topk) + " does not fit in size_t");
}

Status prefill_unguarded(const PrefillParams& requested) {
  FP8DSA_RETURN_IF_ERROR(validate(requested));
  PrefillParams params = requested;
  const Selection selection = choose_selection(requested);
  params.fused = selection.fused;
  const WorkspacePlan plan = plan_workspace(params, selection.chunk_tokens);
  if (plan.total == kSizeOverflow) return workspace_too_large(params);
  if (params.workspace_bytes < plan.total) {
    std::string sizes = std::to_string(plan.total);
    if (!params.fused) {
      if (params.selection_chunk_tokens == 0 && params.indexer.num_tokens > kMinSelectionChunkTokens) {
        sizes += "; " + std::to_string(plan_workspace(params, kMinSelectionChunkTokens).total) +
                 " for the unfused path in chunks of " + std::to_string(kMinSelectionChunkTokens) + " tokens";
      }
      PrefillParams fused = params;
      fused.fused = true;
      sizes += "; " + std::to_string(plan_workspace(fused).total) + " with fused = true";
    }
    return {StatusCode::kWorkspaceTooSmall, "prefill: workspace_bytes (" + std::to_string(params.workspace_bytes) +
                                                ") is below prefill_workspace_bytes() (" + sizes + ")"};
  }
  if (plan.total > 0 && params.workspace == nullptr) {
    return invalid_argument("prefill: workspace is null but " + std::to_string(plan.total) +
                            " bytes are needed");
  }
  if (reinterpret_cast<uintptr_t>(params.workspace) % kWorkspaceAlignment != 0) {
    return invalid_argument("prefill: workspace must be " + std::to_string(kWorkspaceAlignment) + "-byte aligned");
  }
  FP8DSA_RETURN_IF_ERROR(check_device());

  char* base = static_cast<char*>(params.workspace);
  float* logits = reinterpret_cast<float*>(base + plan.logits_offset);
  int32_t* indices = reinterpret_cast<int32_t*>(base + plan.indices_offset);

  if (params.fused) {
    FusedTopkParams fused = fused_params_for(params);
    fused.select.indices = indices;
    fused.workspace = plan.topk_bytes > 0 ? base + plan.topk_offset : nullptr;
    fused.workspace_bytes = plan.topk_bytes;
    FP8DSA_RETURN_IF_ERROR(fp8dsa::fused_topk(fused));
  } else {
    FP8DSA_RETURN_IF_ERROR(score_then_select(params, plan, logits, indices, base));
  }

  SparseMlaParams attention = params.attention;
  attention.indices = indices;
  attention.topk = params.topk;
  attention.indices_stride = params.topk;
  attention.stream = params.stream;
  return sparse_mla_prefill(attention);
}

}  // namespace

bool detail::pipeline::runs_fused(const PrefillParams& params) { return choose_selection(params).fused; }

Status detail::pipeline::select_in_chunks(const IndexerParams& indexer, const TopkParams& topk,
                                          int64_t chunk_tokens) {
  const IndexerParams whole = indexer.resolved();
  if (chunk_tokens <= 0 && whole.num_tokens > 0) {
    return invalid_argument("prefill: the selection's token chunk must be positive");
  }
  const int64_t indices_stride = topk.indices_stride > 0 ? topk.indices_stride : topk.k;
  const int64_t q_token_bytes = whole.q_token_stride * dtype_bytes(whole.q_dtype);
  for (int64_t t0 = 0; t0 < whole.num_tokens; t0 += chunk_tokens) {
    IndexerParams part = whole;
    part.num_tokens = std::min(chunk_tokens, whole.num_tokens - t0);
    part.q = static_cast<const char*>(whole.q) + t0 * q_token_bytes;
    part.w = whole.w + t0 * whole.w_token_stride;
    part.ks = whole.ks + t0;
    part.ke = whole.ke + t0;
    FP8DSA_RETURN_IF_ERROR(indexer_logits(part));
    TopkParams select = topk;
    select.num_rows = part.num_tokens;
    select.ks = part.ks;
    select.ke = part.ke;
    select.indices = topk.indices + t0 * indices_stride;
    if (topk.row_seq != nullptr) select.row_seq = topk.row_seq + t0;
    if (topk.row_pos_base != nullptr) select.row_pos_base = topk.row_pos_base + t0;
    FP8DSA_RETURN_IF_ERROR(fp8dsa::topk(select));
  }
  return Status::ok();
}

int64_t detail::pipeline::selection_chunk(const PrefillParams& params) {
  const Selection selection = choose_selection(params);
  return selection.fused ? 0 : selection.chunk_tokens;
}

Status prefill_workspace_bytes(const PrefillParams& params, size_t* bytes) {
  return detail::no_throw("prefill_workspace_bytes", [&] {
    if (bytes == nullptr) return invalid_argument("prefill_workspace_bytes: bytes must not be null");
    FP8DSA_RETURN_IF_ERROR(detail::pipeline::validate_shape(params));
    const size_t total = plan_workspace(params).total;
    if (total == kSizeOverflow) return workspace_too_large(params);
    *bytes = total;
    return Status::ok();
  });
}

size_t prefill_workspace_bytes(const PrefillParams& params) {
  size_t bytes = 0;
  return prefill_workspace_bytes(params, &bytes).is_ok() ? bytes : kSizeOverflow;
}

Status prefill(const PrefillParams& params) {
  return detail::no_throw("prefill", [&] { return prefill_unguarded(params); });
}

}  // namespace fp8dsa
