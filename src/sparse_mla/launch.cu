// Host side of the native FP8 sparse MLA kernels: resolves strides, folds the scales and launches
// the 64-head kernel (one CTA per token and 64-head block: h = 128 gives two CTAs per token that
// share rows through L2; h = 32 one CTA with its rows past h zero) or, for h in {8, 16}, the
// transposed small-head kernel (one CTA per two tokens). DeepSeek-V3.2's 656-byte rows go to their own
// 64-head kernel (v32_kernel.cuh) for every h. The 64-head kernel's last wave of CTAs is balanced by
// splitting its tokens' keys (tail_split.h).
#include <cmath>
#include <limits>
#include <string>

#include "core/cuda_check.h"
#include "fp8dsa/lse_merge.h"
#include "sparse_mla/config.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/tail_split.h"

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

// The arguments of tokens [first, T): every per-token input and output advanced by `first` tokens.
KernelArgs from_token(const KernelArgs& k, int64_t first) {
  KernelArgs a = k;
  a.q += first * k.q_token_stride;
  a.indices += first * k.indices_stride;
  if (a.topk_length != nullptr) a.topk_length += first;
  a.out += first * k.out_token_stride;
  a.lse += first * k.num_heads;
  if (a.max_logits != nullptr) a.max_logits += first * k.num_heads;
  return a;
}

// The 64-head kernel with its last wave balanced (tail_split.h): the tokens of the full waves whole,
// then the last wave's tokens in key parts into a stream-ordered workspace, merged by lse_merge
// (which applies the sink) into the outputs. Where the workspace cannot be had, the tail runs whole.
Status launch_seesaw_balanced(const Fp8Tuning& tuning, const KernelArgs& k, int64_t num_tokens,
                              cudaStream_t stream) {
  const TailSplit plan = plan_tail_split(num_tokens, k.head_blocks, k.topk, device_sm_count(), tuning.tail_parts);
  const auto whole_tokens = [&](int64_t first, int64_t count) {
    if (count == 0) return Status::ok();
    return launch_seesaw(tuning.qk_chains, from_token(k, first), dim3(static_cast<unsigned>(count * k.head_blocks)),
                         stream);
  };
  if (plan.parts == 1) return whole_tokens(0, num_tokens);
  FP8DSA_RETURN_IF_ERROR(whole_tokens(0, plan.main_tokens));
  const int64_t first = plan.main_tokens, tail = num_tokens - first;
  const int64_t rows = tail * k.num_heads;  // (token, head) rows of one part
  const size_t out_bytes = static_cast<size_t>(plan.parts * rows * MlaShape::kDv) * 2;
  const size_t row_bytes = static_cast<size_t>(plan.parts * rows) * sizeof(float);
  void* workspace = nullptr;
  if (cudaMallocAsync(&workspace, out_bytes + 2 * row_bytes, stream) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it and run the tail whole
    return whole_tokens(first, tail);
  }
  auto* out_parts = static_cast<__nv_bfloat16*>(workspace);
  auto* lse_parts = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + out_bytes);
  float* max_parts = lse_parts + plan.parts * rows;
  const KernelArgs tail_args = from_token(k, first);  // the tail's outputs: where the merge writes
  KernelArgs t = tail_args;
  t.attn_sink = nullptr;  // the merge applies it
  t.out = out_parts;
  t.out_head_stride = MlaShape::kDv;
  t.out_token_stride = int64_t{k.num_heads} * MlaShape::kDv;
  t.lse = lse_parts;
  t.max_logits = k.max_logits != nullptr ? max_parts : nullptr;
  t.part_keys = plan.part_keys;
  t.out_part_stride = rows * MlaShape::kDv;
  t.lse_part_stride = rows;
  const auto merge_tail_parts = [&]() -> Status {
    LseMergeParams m;
    m.num_tokens = tail;
    m.num_heads = k.num_heads;
    m.d_v = MlaShape::kDv;
    m.num_parts = plan.parts;
    m.out_parts = out_parts;
    m.lse_parts = lse_parts;
    m.max_logits_parts = t.max_logits;
    m.attn_sink = k.attn_sink;
    m.out = tail_args.out;
    m.out_token_stride = k.out_token_stride;
    m.out_head_stride = k.out_head_stride;
    m.lse = tail_args.lse;
    m.max_logits = tail_args.max_logits;
    m.stream = stream;
    return lse_merge(m);
  };
  const Status launched = launch_seesaw(
      tuning.qk_chains, t, dim3(static_cast<unsigned>(tail * k.head_blocks), static_cast<unsigned>(plan.parts)), stream);
  const Status s = launched.is_ok() ? merge_tail_parts() : launched;
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  FP8DSA_RETURN_IF_ERROR(s);
  return freed == cudaSuccess ? Status::ok() : cuda_status(freed, "sparse_mla fp8: cudaFreeAsync of the tail workspace");
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
  if (tuning.tail_parts < 0 || tuning.tail_parts > kMaxTailParts) {
    return invalid_argument("sparse_mla fp8: tail_parts takes 0 (the planner's choice), 1 (never split) or up to " +
                            std::to_string(kMaxTailParts) + " key parts (got " + std::to_string(tuning.tail_parts) +
                            ")");
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
  k.num_tokens = r.num_tokens;
  k.part_keys = r.topk;
  k.out_part_stride = 0;
  k.lse_part_stride = 0;
  if (!(k.score_scale_log2 > 0.0f) || !std::isfinite(k.score_scale_log2)) {
    return invalid_argument("sparse_mla fp8: q_scale * kv_scale * sm_scale must be a finite positive f32");
  }
  const unsigned grid = static_cast<unsigned>(blocks);
  if (v32) return launch_v32(r.q_terms, k, grid, r.stream);
  if (transposed) {
    const unsigned pairs = static_cast<unsigned>((r.num_tokens + 1) / 2);  // two tokens a CTA
    return r.num_heads == 8 ? launch_small_heads<8>(k, pairs, r.stream) : launch_small_heads<16>(k, pairs, r.stream);
  }
  return launch_seesaw_balanced(tuning, k, r.num_tokens, r.stream);
}

}  // namespace fp8dsa::detail::sparse_mla
