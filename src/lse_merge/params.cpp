// LseMergeParams: stride resolution and the argument checks both entry points run first.
#include <cstdint>

#include "core/no_throw.h"
#include "core/validate.h"
#include "fp8dsa/lse_merge.h"

namespace fp8dsa {
namespace {
constexpr const char* kOp = "lse_merge";
}  // namespace

using detail::product_or_max;

LseMergeParams LseMergeParams::resolved() const {
  LseMergeParams r = *this;
  if (r.head_stride == 0) r.head_stride = r.d_v;
  if (r.token_stride == 0) r.token_stride = product_or_max(r.num_heads, r.head_stride);
  if (r.part_stride == 0) r.part_stride = product_or_max(r.num_tokens, r.token_stride);
  if (r.out_head_stride == 0) r.out_head_stride = r.d_v;
  if (r.out_token_stride == 0) r.out_token_stride = product_or_max(r.num_heads, r.out_head_stride);
  return r;
}

static Status validate_unguarded(const LseMergeParams& params) {
  using namespace detail;
  FP8DSA_RETURN_IF_ERROR(check_size(kOp, "num_tokens", params.num_tokens));
  FP8DSA_RETURN_IF_ERROR(check_range(kOp, "num_heads", params.num_heads, 1, 65535));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "d_v", params.d_v, {512}));
  FP8DSA_RETURN_IF_ERROR(check_range(kOp, "num_parts", params.num_parts, 1, 1024));
  FP8DSA_RETURN_IF_ERROR(check_dtype(kOp, "out_parts", params.out_parts_dtype, DType::kBF16));
  FP8DSA_RETURN_IF_ERROR(check_dtype(kOp, "out", params.out_dtype, DType::kBF16));
  const LseMergeParams p = params.resolved();
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "head_stride", p.head_stride, p.d_v, "d_v"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "head_stride", p.head_stride, 8, "16-byte rows"));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "a token of out_parts", p.num_heads, p.head_stride, 2));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "token_stride", p.token_stride, int64_t{p.num_heads} * p.head_stride,
                                        "num_heads * head_stride"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "token_stride", p.token_stride, 8, "16-byte rows"));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "a part of out_parts", p.num_tokens, p.token_stride, 2));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "part_stride", p.part_stride, p.num_tokens * p.token_stride,
                                        "num_tokens * token_stride"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "part_stride", p.part_stride, 8, "16-byte rows"));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "out_parts", p.num_parts, p.part_stride, 2));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "out_head_stride", p.out_head_stride, p.d_v, "d_v"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "out_head_stride", p.out_head_stride, 8, "16-byte rows"));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "a token of out", p.num_heads, p.out_head_stride, 2));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "out_token_stride", p.out_token_stride,
                                        int64_t{p.num_heads} * p.out_head_stride, "num_heads * out_head_stride"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "out_token_stride", p.out_token_stride, 8, "16-byte rows"));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "out", p.num_tokens, p.out_token_stride, 2));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "lse_parts", p.num_parts, p.num_tokens * p.num_heads, 4));

  const bool has_rows = p.num_tokens > 0;
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "out_parts", p.out_parts, has_rows, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "lse_parts", p.lse_parts, has_rows, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "out", p.out, has_rows, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "lse", p.lse, has_rows, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "max_logits_parts", p.max_logits_parts, has_rows && p.max_logits,
                                        "max_logits"));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "out_parts", p.out_parts, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "out", p.out, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "lse_parts", p.lse_parts, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "max_logits_parts", p.max_logits_parts, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "attn_sink", p.attn_sink, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "lse", p.lse, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "max_logits", p.max_logits, 4));
  return Status::ok();
}

Status validate(const LseMergeParams& params) {
  return detail::no_throw(kOp, [&] { return validate_unguarded(params); });
}

}  // namespace fp8dsa
