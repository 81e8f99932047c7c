// Merging partial sparse MLA results over disjoint key sets: context parallel with the keys split
// across ranks (SPEC 10). Rank r runs sparse_mla_prefill over its share of every token's keys (the
// indices outside its share invalid, e.g. -1) and without attn_sink, giving out_r and lse_r; this
// combines the R parts into what one call over all keys gives:
//
//   lse        = log(sum_r exp(lse_r))           over the parts with a finite lse_r
//   out        = sum_r exp(lse_r - lse) * out_r  times the sink factor 1 / (1 + exp(sink[h] - lse))
//   max_logits = max_r max_logits_r
//
// A part with no valid key for a row (lse_r = +inf, SPEC 4's marker; -inf counts the same) adds
// nothing; a row no part has a valid key for gives out = 0, lse = +inf, max_logits = -inf. A part
// whose lse or max_logits is NaN for a row (a NaN score, fp8dsa/sparse_mla.h) makes that row's
// outputs NaN.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "fp8dsa/types.h"

namespace fp8dsa {

struct LseMergeParams {
  int64_t num_tokens = 0;  // T
  int num_heads = 0;       // h, in [1, 65535]
  int d_v = 512;           // 512
  int num_parts = 0;       // R, in [1, 1024]

  // [R, T, h, d_v] bf16, 16-byte aligned: row (r, t, h) at r * part_stride + t * token_stride +
  // h * head_stride elements. Strides multiples of 8 (16-byte rows); 0 = packed.
  const void* out_parts = nullptr;
  DType out_parts_dtype = DType::kBF16;
  int64_t part_stride = 0, token_stride = 0, head_stride = 0;
  const float* lse_parts = nullptr;         // [R, T, h] f32, packed
  const float* max_logits_parts = nullptr;  // [R, T, h] f32, packed; optional
  const float* attn_sink = nullptr;         // [h] optional (may be +-inf)

  void* out = nullptr;  // [T, h, d_v] bf16, 16-byte aligned; strides as for out_parts, 0 = packed
  DType out_dtype = DType::kBF16;
  int64_t out_token_stride = 0, out_head_stride = 0;
  float* lse = nullptr;         // [T, h] f32, packed
  float* max_logits = nullptr;  // [T, h] f32, packed; optional (needs max_logits_parts)

  cudaStream_t stream = nullptr;

  LseMergeParams resolved() const;
};

Status validate(const LseMergeParams& params);

// On the GPU (device pointers), asynchronous on params.stream.
Status lse_merge(const LseMergeParams& params);

namespace reference {
// The same in f64 on the host (host pointers).
Status lse_merge_cpu(const LseMergeParams& params);
}  // namespace reference

}  // namespace fp8dsa
