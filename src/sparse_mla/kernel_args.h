// Internal: the resolved arguments of the native FP8 sparse MLA kernels, as the device code reads
// them (strides in elements, scales folded). Built once on the host by launch.cu.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

namespace fp8dsa::detail::sparse_mla {

struct KernelArgs {
  const uint8_t* q;  // [T, h, 576] e4m3
  int64_t q_token_stride, q_head_stride;
  const uint8_t* kv;  // [N, 576] e4m3; never null (a mapped address even when N = 0)
  int64_t kv_row_stride, num_kv;
  const int32_t* indices;  // [T, indices_stride]
  int64_t indices_stride;
  int topk;
  const int32_t* topk_length;  // optional
  const float* attn_sink;      // optional
  float score_scale_log2;      // q_scale * kv_scale * sm_scale * log2(e)
  float kv_scale;
  __nv_bfloat16* out;  // [T, h, 512]
  int64_t out_token_stride, out_head_stride;
  float* lse;         // [T, h] packed
  float* max_logits;  // [T, h] packed; optional
  int num_heads;
  int head_blocks;  // CTAs per token: ceil(num_heads / 64) for the 64-head kernel, 1 otherwise
  int64_t num_tokens;  // the small-head kernel's CTA b runs tokens 2b and 2b + 1 (below num_tokens)
  // The keys of a token split into parts (the 64-head kernel's last wave, tail_split.h): CTA
  // (x, y) runs positions [y * part_keys, (y + 1) * part_keys) of its token's list and writes part
  // y's results at y * out_part_stride / y * lse_part_stride elements from out / lse / max_logits.
  // Unsplit: part_keys = topk, gridDim.y = 1, both strides 0. Only the 64-head (seesaw) kernel is
  // launched split; the others read part_keys for their lengths and always run part 0.
  int part_keys;
  int64_t out_part_stride, lse_part_stride;
};

}  // namespace fp8dsa::detail::sparse_mla
