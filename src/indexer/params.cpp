// IndexerParams: stride resolution and the argument checks every entry point runs first.
#include "fp8dsa/indexer.h"

#include <cstdint>
#include <limits>
#include <string>

#include "core/no_throw.h"
#include "core/validate.h"

namespace fp8dsa {

const char* indexer_kernel_name(IndexerKernel kernel) {
  switch (kernel) {
    case IndexerKernel::kAuto: return "auto";
    case IndexerKernel::kQResident: return "q_resident";
    case IndexerKernel::kKResident: return "k_resident";
    case IndexerKernel::kReference: return "reference";
  }
  return "unknown";
}

IndexerParams IndexerParams::resolved() const {
  IndexerParams r = *this;
  if (r.q_token_stride == 0) r.q_token_stride = int64_t{r.num_heads} * r.head_dim;
  if (r.w_token_stride == 0) r.w_token_stride = r.num_heads;
  if (r.k_row_stride == 0) r.k_row_stride = r.head_dim;
  if (r.logits_stride == 0) r.logits_stride = r.num_keys;
  return r;
}

static Status validate_unguarded(const IndexerParams& params) {
  using namespace detail;
  constexpr const char* kOp = "indexer";
  const IndexerParams p = params.resolved();

  FP8DSA_RETURN_IF_ERROR(check_size(kOp, "num_tokens", p.num_tokens));
  FP8DSA_RETURN_IF_ERROR(check_size(kOp, "num_keys", p.num_keys));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "num_heads", p.num_heads, {4, 8, 16, 32, 64}));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "head_dim", p.head_dim, {64, 128}));
  FP8DSA_RETURN_IF_ERROR(check_dtype(kOp, "q", p.q_dtype, DType::kE4M3));
  FP8DSA_RETURN_IF_ERROR(check_dtype(kOp, "k", p.k_dtype, DType::kE4M3));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "kernel", static_cast<int>(p.kernel),
                                      {static_cast<int>(IndexerKernel::kAuto),
                                       static_cast<int>(IndexerKernel::kQResident),
                                       static_cast<int>(IndexerKernel::kKResident),
                                       static_cast<int>(IndexerKernel::kReference)}));

  const int64_t packed_q = int64_t{p.num_heads} * p.head_dim;
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "q_token_stride", p.q_token_stride, packed_q,
                                        "num_heads * head_dim"));
  // TMA boxes and 16-byte vector loads of e4m3 rows need 16-byte row starts.
  FP8DSA_RETURN_IF_ERROR(
      check_multiple(kOp, "q_token_stride", p.q_token_stride, 16, "16-byte row alignment"));
  FP8DSA_RETURN_IF_ERROR(
      check_at_least(kOp, "w_token_stride", p.w_token_stride, p.num_heads, "num_heads"));
  FP8DSA_RETURN_IF_ERROR(
      check_at_least(kOp, "k_row_stride", p.k_row_stride, p.head_dim, "head_dim"));
  FP8DSA_RETURN_IF_ERROR(
      check_multiple(kOp, "k_row_stride", p.k_row_stride, 16, "16-byte row alignment"));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "logits_stride", p.logits_stride, p.num_keys, "num_keys"));
  // Logit rows are stored with 16-byte vector stores. logits_stride = 0 (packed) resolves to num_keys: say
  // what the caller passed and what to pass instead.
  if (p.logits_stride % kLogitsRowMultiple != 0) {
    const std::string given =
        params.logits_stride == 0 ? concat("0, i.e. packed = num_keys = ", p.num_keys) : concat(p.logits_stride);
    const std::string instead =
        p.logits_stride > std::numeric_limits<int64_t>::max() - (kLogitsRowMultiple - 1)
            ? std::string()
            : concat("; pass logits_stride = ", min_logits_stride(p.logits_stride),
                     params.logits_stride == 0 ? " (num_keys rounded up to a multiple of 4)" : "");
    return invalid_argument(
        concat(kOp, ": logits_stride (", given, ") must be a multiple of 4 (16-byte rows of f32 logits)", instead));
  }

  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "q", p.num_tokens, p.q_token_stride, 1));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "w", p.num_tokens, p.w_token_stride, 4));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "k", p.num_keys, p.k_row_stride, 1));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "logits", p.num_tokens, p.logits_stride, 4));

  const bool has_tokens = p.num_tokens > 0;
  const bool has_keys = p.num_keys > 0;
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "q", p.q, has_tokens, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "w", p.w, has_tokens, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "ks", p.ks, has_tokens, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "ke", p.ke, has_tokens, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "k", p.k, has_keys, "num_keys > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "k_scale", p.k_scale, has_keys, "num_keys > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "logits", p.logits, has_tokens && has_keys,
                                        "num_tokens > 0 and num_keys > 0"));

  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "q", p.q, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "k", p.k, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "logits", p.logits, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "w", p.w, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "k_scale", p.k_scale, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "ks", p.ks, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "ke", p.ke, 4));
  return Status::ok();
}

Status validate(const IndexerParams& params) {
  return detail::no_throw("indexer", [&] { return validate_unguarded(params); });
}

}  // namespace fp8dsa
