// FusedTopkParams: the argument checks (the two stages' own, on the params the fused call stands
// for) and the workspace query.
#include <limits>
#include <string>

#include "core/no_throw.h"
#include "core/validate.h"
#include "fp8dsa/fused_topk.h"
#include "fused_topk/candidate_layout.h"
#include "fused_topk/launch.h"
#include "fused_topk/params.h"

namespace fp8dsa {
namespace detail::fused_topk {
namespace {

alignas(16) float placeholder_logits[4];

}  // namespace

IndexerParams scorer_params(const FusedTopkParams& params) {
  IndexerParams s = params.scores;
  s.logits = placeholder_logits;
  // As if the rows were padded to the scorer's 16-byte rule (there are no rows).
  s.logits_stride = s.num_keys >= 0 && s.num_keys <= detail::kMaxExtent ? min_logits_stride(s.num_keys) : 0;
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
  t.logits_stride = 0;
  t.workspace = nullptr;
  t.workspace_bytes = 0;
  t.stream = params.stream;
  return t.resolved();
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

}  // namespace fp8dsa
