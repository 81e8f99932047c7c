// Host side of the native FP8 sparse MLA kernels: resolves strides, folds the scales and launches
// the 64-head kernel (one CTA per token and 64-head block: h = 128 gives two CTAs per token that
// share rows through L2; h = 32 one CTA with its rows past h zero) or, for h in {8, 16}, the
// transposed small-head kernel (one CTA per token). DeepSeek-V3.2's 656-byte rows go to their own
// 64-head kernel (v32_kernel.cuh) for every h.
#include <cmath>
#include <limits>
#include <string>

#include "sparse_mla/config.h"
#include "sparse_mla/launch.h"

namespace fp8dsa::detail::sparse_mla {

bool fp8_kernel_supports(const SparseMlaParams& params) {
  const bool q_dtype_matches = params.kv_format == KvFormat::kDeepSeekV32 ? params.q_dtype == DType::kBF16
                                                                          : params.q_dtype == DType::kE4M3;
  const bool format_known = params.kv_format == KvFormat::kE4m3 || params.kv_format == KvFormat::kDeepSeekV32;
  return (params.num_heads % SeesawConfig::kHeads == 0 || params.num_heads < SeesawConfig::kHeads) &&
         params.num_heads > 0 && params.d_qk == MlaShape::kDqk && params.d_v == MlaShape::kDv && format_known &&
         q_dtype_matches && params.kv_dtype == DType::kE4M3 && params.out_dtype == DType::kBF16;
}

namespace {

Status qk_chains_not_instantiated(int qk_chains) {
  std::string choices;
  for (int c : kSeesawQkChainChoices) choices += (choices.empty() ? "" : ", ") + std::to_string(c);
  return invalid_argument("sparse_mla fp8: qk_chains " + std::to_string(qk_chains) + " is not instantiated (" +
                          choices + ")");
}

}  // namespace

Status launch_sparse_mla_fp8(const SparseMlaParams& params, const Fp8Tuning& tuning) {
  if (!fp8_kernel_supports(params)) {
    return not_implemented("sparse_mla fp8: the FP8 kernel takes d_qk 576, d_v 512, bf16 out, any SPEC head "
                           "count, and e4m3 q with 576-byte e4m3 rows or bf16 q with 656-byte V3.2 rows (got "
                           "num_heads " + std::to_string(params.num_heads) + ", q " + dtype_name(params.q_dtype) +
                           ", kv format " + kv_format_name(params.kv_format) + ")");
  }
  const bool v32 = params.kv_format == KvFormat::kDeepSeekV32;
  if (!is_instantiated_qk_chains(tuning.qk_chains)) return qk_chains_not_instantiated(tuning.qk_chains);
  const SparseMlaParams r = params.resolved();
  const bool transposed = !v32 && (tuning.small_heads == SmallHeads::kTransposed ? has_transposed_kernel(r.num_heads)
                                    : tuning.small_heads == SmallHeads::kDefault  ? transposed_by_default(r.num_heads)
                                                                                  : false);
  if ((transposed || v32) && tuning.qk_chains != kDefaultQkChains) {
    return invalid_argument("sparse_mla fp8: the h < 64 and the V3.2-row kernels take no qk_chains choice (their "
                            "chains are fixed; qk_chains must stay at the default " +
                            std::to_string(kDefaultQkChains) + ")");
  }
  if (v32 && !is_instantiated_v32_q_terms(tuning.v32_q_terms)) {
    return invalid_argument("sparse_mla fp8: the V3.2-row kernel takes 1 or 2 e4m3 terms of q (v32_q_terms " +
                            std::to_string(tuning.v32_q_terms) + ")");
  }
  if (r.num_tokens == 0) return Status::ok();
  const int64_t head_blocks = transposed ? 1 : (r.num_heads + SeesawConfig::kHeads - 1) / SeesawConfig::kHeads;
  const int64_t blocks = r.num_tokens * head_blocks;
  if (blocks > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("sparse_mla fp8: num_tokens * ceil(num_heads / 64) (" + std::to_string(blocks) +
                            ") exceeds the grid limit 2^31 - 1");
  }
  KernelArgs k{};
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
  if (v32) return launch_v32(tuning.v32_q_terms, k, grid, r.stream);
  if (transposed) {
    return r.num_heads == 8 ? launch_small_heads<8>(k, grid, r.stream) : launch_small_heads<16>(k, grid, r.stream);
  }
  return launch_seesaw(tuning.qk_chains, k, grid, r.stream);
}

}  // namespace fp8dsa::detail::sparse_mla
