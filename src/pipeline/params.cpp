// PrefillParams checks: each stage's own checks, minus the fields the pipeline fills itself, plus
// the cross-stage invariants. The workspace is checked by prefill() itself.
#include "fp8dsa/pipeline.h"

#include "core/no_throw.h"
#include "core/validate.h"
#include "pipeline/params.h"

namespace fp8dsa {
namespace {

constexpr const char* kOp = "prefill";

// Stand-ins for the buffers prefill() places in its workspace: aligned, never dereferenced
// (validate() touches no pointed-to memory).
alignas(256) float kWorkspaceLogitsStandIn[4];
alignas(256) int32_t kWorkspaceIndicesStandIn[4];

Status with_prefix(Status status) {
  if (status.is_ok()) return status;
  return {status.code(), detail::concat(kOp, ": ", status.message())};
}

Status validate_unguarded(const PrefillParams& params) {
  using namespace detail;
  FP8DSA_RETURN_IF_ERROR(detail::pipeline::validate_shape(params));
  if (params.attention.topk_length != nullptr) {
    return invalid_argument(concat(kOp, ": attention.topk_length must be null (prefill gives every token "
                                   "min(topk, its key count) selected keys itself)"));
  }

  if (params.fused && params.indexer.kernel != IndexerKernel::kAuto &&
      params.indexer.kernel != IndexerKernel::kQResident) {
    return invalid_argument(concat(kOp, ": indexer.kernel is ", indexer_kernel_name(params.indexer.kernel),
                                   "; fused = true runs the Q-resident scorer (kAuto or kQResident)"));
  }
  IndexerParams indexer = params.indexer;
  indexer.logits = kWorkspaceLogitsStandIn;
  indexer.logits_stride = min_logits_stride(indexer.num_keys);  // the workspace's rows
  FP8DSA_RETURN_IF_ERROR(with_prefix(validate(indexer)));

  SparseMlaParams attention = params.attention;
  attention.indices = kWorkspaceIndicesStandIn;
  attention.indices_stride = 0;
  attention.topk = params.topk;
  FP8DSA_RETURN_IF_ERROR(with_prefix(validate(attention)));

  if (attention.num_tokens != indexer.num_tokens) {
    return invalid_argument(concat(kOp, ": attention.num_tokens (", attention.num_tokens,
                                   ") must equal indexer.num_tokens (", indexer.num_tokens, ")"));
  }
  if (attention.num_kv != indexer.num_keys) {
    return invalid_argument(concat(kOp, ": attention.num_kv (", attention.num_kv,
                                   ") must equal indexer.num_keys (", indexer.num_keys,
                                   ") (the two stages share one key space)"));
  }
  return Status::ok();
}

}  // namespace

namespace detail::pipeline {

Status validate_shape(const PrefillParams& params) {
  using namespace detail;
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "topk", params.topk, 64));
  FP8DSA_RETURN_IF_ERROR(check_range(kOp, "topk", params.topk, 64, 2048));
  FP8DSA_RETURN_IF_ERROR(with_prefix(check_size("indexer", "num_tokens", params.indexer.num_tokens)));
  if (params.selection_chunk_tokens < 0) {
    return invalid_argument(concat(kOp, ": selection_chunk_tokens (", params.selection_chunk_tokens,
                                   ") must be >= 0 (0: as the workspace allows)"));
  }
  return with_prefix(check_size("indexer", "num_keys", params.indexer.num_keys));
}

}  // namespace detail::pipeline

Status validate(const PrefillParams& params) {
  return detail::no_throw(kOp, [&] { return validate_unguarded(params); });
}

}  // namespace fp8dsa
