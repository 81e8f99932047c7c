// SparseMlaParams: stride resolution and the argument checks every entry point runs first.
#include "fp8dsa/sparse_mla.h"

#include "core/no_throw.h"
#include "core/validate.h"

namespace fp8dsa {
namespace {

constexpr const char* kOp = "sparse_mla";

// e4m3 is this stage's input type; bf16 is a known later stage, anything else a caller mistake.
Status check_input_dtype(const char* name, DType given) {
  if (given == DType::kBF16) {
    return not_implemented(detail::concat(kOp, ": ", name,
                                          " dtype bf16: the BF16/dequant path is a later stage"));
  }
  return detail::check_dtype(kOp, name, given, DType::kE4M3);
}

// The V3.2 row fixes the head dims (512 nope + 64 rope) and the dtypes: bf16 queries, e4m3 nope.
Status check_v32_inputs(const SparseMlaParams& p) {
  using namespace detail;
  if (p.d_qk != 576 || p.d_v != 512) {
    return invalid_argument(concat(kOp, ": kv_format deepseek_v32 needs d_qk 576 and d_v 512 (given ", p.d_qk,
                                   " and ", p.d_v, ")"));
  }
  if (p.q_dtype != DType::kBF16) {
    return invalid_argument(concat(kOp, ": q dtype must be bf16 with kv_format deepseek_v32 (given ",
                                   dtype_name(p.q_dtype), ")"));
  }
  return check_dtype(kOp, "kv", p.kv_dtype, DType::kE4M3);
}

}  // namespace

const char* kv_format_name(KvFormat format) {
  switch (format) {
    case KvFormat::kE4m3: return "e4m3";
    case KvFormat::kDeepSeekV32: return "deepseek_v32";
  }
  return "unknown";
}

const char* sparse_mla_kernel_name(SparseMlaKernel kernel) {
  switch (kernel) {
    case SparseMlaKernel::kAuto: return "auto";
    case SparseMlaKernel::kFp8: return "fp8";
    case SparseMlaKernel::kReference: return "reference";
  }
  return "unknown";
}

SparseMlaParams SparseMlaParams::resolved() const {
  SparseMlaParams r = *this;
  if (r.q_head_stride == 0) r.q_head_stride = r.d_qk;
  // Saturating: a head stride whose product with num_heads overflows is refused by validate().
  if (r.q_token_stride == 0) r.q_token_stride = detail::product_or_max(r.num_heads, r.q_head_stride);
  if (r.kv_row_stride == 0) r.kv_row_stride = r.kv_format == KvFormat::kDeepSeekV32 ? kV32RowBytes : r.d_qk;
  if (r.indices_stride == 0) r.indices_stride = r.topk;
  if (r.out_head_stride == 0) r.out_head_stride = r.d_v;
  if (r.out_token_stride == 0) r.out_token_stride = detail::product_or_max(r.num_heads, r.out_head_stride);
  return r;
}

static Status validate_unguarded(const SparseMlaParams& params) {
  using namespace detail;
  const SparseMlaParams p = params.resolved();

  FP8DSA_RETURN_IF_ERROR(check_size(kOp, "num_tokens", p.num_tokens));
  FP8DSA_RETURN_IF_ERROR(check_size(kOp, "num_kv", p.num_kv));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "num_heads", p.num_heads, {8, 16, 32, 64, 128}));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "kv_format", static_cast<int>(p.kv_format),
                                      {static_cast<int>(KvFormat::kE4m3),
                                       static_cast<int>(KvFormat::kDeepSeekV32)}));
  const bool v32 = p.kv_format == KvFormat::kDeepSeekV32;
  if (v32) FP8DSA_RETURN_IF_ERROR(check_v32_inputs(p));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "q_terms", p.q_terms, {1, 2}));
  if (p.d_qk == 512) {
    return not_implemented("sparse_mla: d_qk (512) without the rope part is a later stage");
  }
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "d_qk", p.d_qk, {576}));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "d_v", p.d_v, {512}));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "topk", p.topk, 64));
  FP8DSA_RETURN_IF_ERROR(check_range(kOp, "topk", p.topk, 64, 16384));
  if (!v32) {
    FP8DSA_RETURN_IF_ERROR(check_input_dtype("q", p.q_dtype));
    FP8DSA_RETURN_IF_ERROR(check_input_dtype("kv", p.kv_dtype));
  }
  FP8DSA_RETURN_IF_ERROR(check_dtype(kOp, "out", p.out_dtype, DType::kBF16));
  FP8DSA_RETURN_IF_ERROR(check_one_of(kOp, "kernel", static_cast<int>(p.kernel),
                                      {static_cast<int>(SparseMlaKernel::kAuto),
                                       static_cast<int>(SparseMlaKernel::kFp8),
                                       static_cast<int>(SparseMlaKernel::kReference)}));
  FP8DSA_RETURN_IF_ERROR(check_positive_finite(kOp, "sm_scale", p.sm_scale));
  FP8DSA_RETURN_IF_ERROR(check_positive_finite(kOp, "q_scale", p.q_scale));
  FP8DSA_RETURN_IF_ERROR(check_positive_finite(kOp, "kv_scale", p.kv_scale));
  // The kernels fold the three scales and log2(e) into one f32 score scale: a product that
  // overflows it would make every score +-inf (lse = +inf, the "no valid key" marker), one that
  // underflows to 0 every score 0.
  const double score_scale = double{p.q_scale} * double{p.kv_scale} * double{p.sm_scale};
  const float score_scale_log2 = static_cast<float>(score_scale * 1.4426950408889634);
  if (!(std::isfinite(score_scale_log2) && score_scale_log2 > 0.0f)) {
    return invalid_argument(concat(kOp, ": q_scale * kv_scale * sm_scale (", p.q_scale, " * ", p.kv_scale,
                                   " * ", p.sm_scale, " = ", score_scale,
                                   ") times log2(e) must be a finite positive f32 (in (0, 2.3e38])"));
  }

  // q and kv rows are fetched with TMA / 16-byte loads, so every row start must be 16-byte aligned:
  // 16 e4m3 or 8 bf16 q elements. kv_row_stride is in bytes.
  const int64_t q_bytes = v32 ? 2 : 1;
  const int64_t q_row_multiple = 16 / q_bytes;
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "q_head_stride", p.q_head_stride, p.d_qk, "d_qk"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "q_head_stride", p.q_head_stride, q_row_multiple,
                                        "16-byte row alignment"));
  // One token's heads must fit in int64 before the token stride is compared with them.
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "q token", p.num_heads, p.q_head_stride, q_bytes));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "q_token_stride", p.q_token_stride,
                                        int64_t{p.num_heads} * p.q_head_stride,
                                        "num_heads * q_head_stride"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "q_token_stride", p.q_token_stride, q_row_multiple,
                                        "16-byte row alignment"));
  if (v32) {
    FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "kv_row_stride", p.kv_row_stride, kV32RowBytes,
                                          "the deepseek_v32 row bytes"));
  } else {
    FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "kv_row_stride", p.kv_row_stride, p.d_qk, "d_qk"));
  }
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "kv_row_stride", p.kv_row_stride, 16,
                                        "16-byte row alignment"));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "indices_stride", p.indices_stride, p.topk, "topk"));
  // bf16 output rows are written with 16-byte stores: 8 elements.
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "out_head_stride", p.out_head_stride, p.d_v, "d_v"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "out_head_stride", p.out_head_stride, 8,
                                        "16-byte row alignment"));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "out token", p.num_heads, p.out_head_stride, 2));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "out_token_stride", p.out_token_stride,
                                        int64_t{p.num_heads} * p.out_head_stride,
                                        "num_heads * out_head_stride"));
  FP8DSA_RETURN_IF_ERROR(check_multiple(kOp, "out_token_stride", p.out_token_stride, 8,
                                        "16-byte row alignment"));

  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "q", p.num_tokens, p.q_token_stride, q_bytes));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "kv", p.num_kv, p.kv_row_stride, 1));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "indices", p.num_tokens, p.indices_stride, 4));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "out", p.num_tokens, p.out_token_stride, 2));

  const bool has_tokens = p.num_tokens > 0;
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "q", p.q, has_tokens, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "kv", p.kv, has_tokens && p.num_kv > 0,
                                        "num_tokens > 0 and num_kv > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "indices", p.indices, has_tokens, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "out", p.out, has_tokens, "num_tokens > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "lse", p.lse, has_tokens, "num_tokens > 0"));

  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "q", p.q, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "kv", p.kv, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "out", p.out, 16));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "indices", p.indices, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "topk_length", p.topk_length, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "attn_sink", p.attn_sink, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "lse", p.lse, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "max_logits", p.max_logits, 4));
  return Status::ok();
}

Status validate(const SparseMlaParams& params) {
  return detail::no_throw("sparse_mla", [&] { return validate_unguarded(params); });
}

}  // namespace fp8dsa
