// Stage 3: sparse MLA prefill in native FP8 (SPEC section 4). Conventions match FlashMLA's
// flash_mla_sparse_fwd.
//
//   s_j        = (q_scale * kv_scale * sm_scale) * dot(q[t, h, :], kv[idx_j, :])   over valid j
//   out        = kv_scale * sum_j softmax(s)_j * kv[idx_j, :d_v]      [T, h, d_v] bf16
//   lse        = log(sum_j exp(s_j))                                  [T, h] f32 (natural log)
//   max_logits = max_j s_j                                            [T, h] f32
//
// idx_j is invalid when < 0, >= N or at position >= topk_length[t]; invalid keys take no part.
// A token with no valid key gives out = 0, lse = +inf, max_logits = -inf.
// With attn_sink: out *= exp(lse) / (exp(lse) + exp(attn_sink[h])); lse, max_logits unchanged.
//
// validate() checks every field below but reads no tensor. Data values are the caller's: NaN in q,
// kv or attn_sink is not detected and makes the outputs of the rows it reaches unspecified (NaN
// in the CPU reference); so does a score that overflows f32 although the scale product is finite
// (large scales with large q / kv values): lse and max_logits may then be +inf for a token with
// valid keys, which reads as the "no valid key" marker.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "fp8dsa/types.h"

namespace fp8dsa {

enum class SparseMlaKernel : int {
  kAuto = 0,
  kFp8,        // native FP8: QK^T and P.V on the e4m3 tensor cores (h in {8, 16}: keys as the MMA
               // rows; h = 32: the 64-head kernel with zero rows past h; h = 128: two 64-head CTAs)
  kReference,  // plain CUDA-core f32 kernel (the GPU reference)
};
const char* sparse_mla_kernel_name(SparseMlaKernel kernel);

struct SparseMlaParams {
  int64_t num_tokens = 0;  // T
  int64_t num_kv = 0;      // N latent rows
  int num_heads = 128;     // h in {8, 16, 32, 64, 128}
  int d_qk = 576;          // 512 "nope" + 64 "rope"
  int d_v = 512;           // V = the first d_v columns of each kv row

  const void* q = nullptr;  // [T, h, d_qk], 16-byte aligned
  DType q_dtype = DType::kE4M3;
  // >= h * q_head_stride, a multiple of 16 (16-byte rows); 0 = h * q_head_stride
  int64_t q_token_stride = 0;
  int64_t q_head_stride = 0;   // >= d_qk, a multiple of 16; 0 = d_qk

  const void* kv = nullptr;  // [N, d_qk], 16-byte aligned
  DType kv_dtype = DType::kE4M3;
  int64_t kv_row_stride = 0;  // >= d_qk, a multiple of 16; 0 = d_qk

  const int32_t* indices = nullptr;  // [T, indices_stride] rows of kv (any value; see above)
  int topk = 2048;                   // a multiple of 64
  int64_t indices_stride = 0;        // >= topk; 0 = topk
  // [T] optional: token t uses indices[t, :topk_length[t]]. Not validated (on the GPU it is device
  // memory, which a host check cannot read without a sync): a value < 0 counts as 0 and one > topk
  // as topk, in the kernels and the CPU reference alike.
  const int32_t* topk_length = nullptr;

  const float* attn_sink = nullptr;  // [h] optional per-head sink logit (may be +-inf)
  float sm_scale = 0.0f;             // required, finite, > 0
  float q_scale = 1.0f;              // per-tensor dequant scales, finite, > 0
  float kv_scale = 1.0f;
  // The kernels use q_scale * kv_scale * sm_scale * log2(e) as one f32: validate() rejects scales
  // whose product is not a finite positive f32 (each finite, e.g. 1e20 and 1e20, is not enough).

  void* out = nullptr;  // [T, h, d_v] bf16, 16-byte aligned
  DType out_dtype = DType::kBF16;
  // >= h * out_head_stride, a multiple of 8 (16-byte rows); 0 = h * out_head_stride
  int64_t out_token_stride = 0;
  int64_t out_head_stride = 0;   // >= d_v, a multiple of 8; 0 = d_v
  float* lse = nullptr;          // [T, h] f32, packed
  float* max_logits = nullptr;   // [T, h] f32, packed; optional

  SparseMlaKernel kernel = SparseMlaKernel::kAuto;
  cudaStream_t stream = nullptr;

  SparseMlaParams resolved() const;
};

Status validate(const SparseMlaParams& params);

// The kernel kAuto resolves to for these params.
SparseMlaKernel sparse_mla_route(const SparseMlaParams& params);

// Fast path on the GPU. Asynchronous on params.stream.
Status sparse_mla_prefill(const SparseMlaParams& params);

namespace reference {
// The spec in code: f64 on the dequantised e4m3 inputs, exact softmax. Host pointers. Dequantises
// only the kv rows the indices select; OutOfMemory where the host has not that much.
Status sparse_mla_cpu(const SparseMlaParams& params);
// Plain CUDA-core kernel, f32. Device pointers.
Status sparse_mla_gpu(const SparseMlaParams& params);
}  // namespace reference

}  // namespace fp8dsa
