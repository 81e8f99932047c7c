// Host side of the native FP8 sparse MLA kernel: resolves strides, folds the scales, launches one
// CTA per (token, 64-head block); h = 128 gives two CTAs per token that share rows through L2 (or, on
// request, a 2-CTA cluster that gathers every row once: HeadPairs), and
// h in {8, 16} one CTA of the transposed-orientation kernel, h = 32 one CTA of the h = 64 kernel with
// its MMA rows past h zero (faster there, see launch_small_heads.cu).
#include <cmath>
#include <limits>
#include <string>

#include "core/cuda_check.h"
#include "sparse_mla/fp8_kernel.cuh"  // Fp8KernelParams, Fp8Config
#include "sparse_mla/fp8_launch.h"

namespace fp8dsa::sparse_mla {

bool fp8_kernel_supports(const SparseMlaParams& params) {
  return (params.num_heads % Fp8Config::kHeads == 0 || params.num_heads < Fp8Config::kHeads) &&
         params.num_heads > 0 && params.d_qk == Fp8Config::kDqk &&
         params.d_v == Fp8Config::kDv && params.q_dtype == DType::kE4M3 && params.kv_dtype == DType::kE4M3 &&
         params.out_dtype == DType::kBF16;
}

bool is_instantiated_qk_groups(int qk_groups) {
  return qk_groups == 1 || qk_groups == 3 || qk_groups == 6 || qk_groups == 9 || qk_groups == 2;
}

Status launch_sparse_mla_fp8(const SparseMlaParams& params, int qk_groups, SmallHeads small_heads,
                             HeadPairs head_pairs) {
  if (!fp8_kernel_supports(params)) {
    return not_implemented("sparse_mla fp8: the FP8 kernel takes e4m3 q and kv, d_qk 576, d_v 512, bf16 out "
                           "and any SPEC head count (got num_heads " + std::to_string(params.num_heads) + ")");
  }
  const SparseMlaParams r = params.resolved();
  if (r.num_tokens == 0) return Status::ok();
  const int64_t head_blocks = (r.num_heads + Fp8Config::kHeads - 1) / Fp8Config::kHeads;
  const int64_t blocks = r.num_tokens * head_blocks;
  if (blocks > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("sparse_mla fp8: num_tokens * num_heads / 64 (" + std::to_string(blocks) +
                            ") exceeds the grid limit 2^31 - 1");
  }
  Fp8KernelParams k{};
  k.q = static_cast<const uint8_t*>(r.q);
  k.q_token_stride = r.q_token_stride;
  k.q_head_stride = r.q_head_stride;
  // With N = 0 every row is zero-filled and kv may be null; cp.async still wants a mapped source.
  k.kv = static_cast<const uint8_t*>(r.num_kv > 0 ? r.kv : r.q);
  k.kv_row_stride = r.kv_row_stride;
  k.num_kv = r.num_kv;
  k.indices = r.indices;
  k.indices_stride = r.indices_stride;
  k.topk = r.topk;
  k.topk_length = r.topk_length;
  k.attn_sink = r.attn_sink;
  k.score_scale_log2 = static_cast<float>(double{r.q_scale} * r.kv_scale * r.sm_scale * 1.4426950408889634);
  k.kv_scale = r.kv_scale;
  k.out = static_cast<__nv_bfloat16*>(r.out);
  k.out_token_stride = r.out_token_stride;
  k.out_head_stride = r.out_head_stride;
  k.lse = r.lse;
  k.max_logits = r.max_logits;
  k.num_heads = r.num_heads;
  k.head_blocks = static_cast<int>(head_blocks);
  if (!(k.score_scale_log2 > 0.0f) || !std::isfinite(k.score_scale_log2)) {
    return invalid_argument("sparse_mla fp8: q_scale * kv_scale * sm_scale must be a finite positive f32");
  }

  const unsigned grid = static_cast<unsigned>(blocks);
  const bool transposed = small_heads == SmallHeads::kTransposed ? has_transposed_kernel(r.num_heads)
                          : small_heads == SmallHeads::kDefault  ? transposed_by_default(r.num_heads)
                                                                 : false;
  if (transposed) {
    if (qk_groups != kDefaultQkGroups) {
      return invalid_argument("sparse_mla fp8: the h < 64 kernel is built for qk_groups " +
                              std::to_string(kDefaultQkGroups) + " only");
    }
    return launch_fp8_small_heads(k, r.num_heads, grid, r.stream);
  }
  if (head_blocks % 2 == 0 && head_pairs == HeadPairs::kCluster) {
    if (qk_groups != kDefaultQkGroups) {
      return invalid_argument("sparse_mla fp8: the 2-CTA cluster kernel is built for qk_groups " +
                              std::to_string(kDefaultQkGroups) + " only (use HeadPairs::kSeparate)");
    }
    return launch_fp8_cluster(k, grid, r.stream);
  }
  switch (qk_groups) {
    case 1: return launch_fp8_instance<1>(k, grid, r.stream);
    case 3: return launch_fp8_instance<3>(k, grid, r.stream);
    case 6: return launch_fp8_instance<6>(k, grid, r.stream);
    case 9: return launch_fp8_instance<9>(k, grid, r.stream);
    case 2: return launch_fp8_instance<2>(k, grid, r.stream);
    default: break;
  }
  return invalid_argument("sparse_mla fp8: qk_groups " + std::to_string(qk_groups) +
                          " is not instantiated (1, 2, 3, 6, 9)");
}

}  // namespace fp8dsa::sparse_mla
