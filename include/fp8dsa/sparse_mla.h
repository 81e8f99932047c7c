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
// validate() checks every field below but reads no tensor. Data values are the caller's: a NaN in
// q or in a selected kv row makes that (token, head) row's score NaN, and then its out, lse and
// max_logits are NaN (every kernel and reference); a NaN attn_sink makes its head's out NaN. A score that overflows f32 although the
// scale product is finite (large scales with large q / kv values) makes the outputs unspecified:
// lse and max_logits may then be +inf for a token with valid keys, which reads as the "no valid
// key" marker.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "fp8dsa/types.h"

namespace fp8dsa {

// The layout of the latent cache rows.
enum class KvFormat : int {
  // 576 bytes: 512 e4m3 "nope" values then 64 e4m3 "rope" values; one per-tensor kv_scale; q is
  // e4m3 [T, h, 576] with one per-tensor q_scale.
  kE4m3 = 0,
  // DeepSeek-V3.2's FP8 row, 656 bytes: 512 e4m3 nope values, 4 f32 scales (one per 128 nope
  // columns; the dequantised value is e4m3 * the scale of its block), 64 bf16 rope values. q is bf16
  // [T, h, 576]; the FP8 kernel quantises its nope part per (token, head) to q_terms e4m3 terms
  // (SparseMlaParams::q_terms) and keeps the rope in bf16. q_scale and kv_scale still multiply as
  // in the formulas above (1 for V3.2 itself).
  kDeepSeekV32,
};
const char* kv_format_name(KvFormat format);

// Byte layout of a kDeepSeekV32 row.
inline constexpr int kV32RowBytes = 656;
inline constexpr int kV32ScaleOffset = 512;  // 4 f32, 16-byte aligned
inline constexpr int kV32RopeOffset = 528;   // 64 bf16
inline constexpr int kV32ScaleBlock = 128;   // nope columns per scale

enum class SparseMlaKernel : int {
  kAuto = 0,
  kFp8,        // native FP8: QK^T and P.V on the e4m3 tensor cores (h in {8, 16}: keys as the MMA
               // rows; h = 32: the 64-head kernel with zero rows past h; h = 128: two 64-head CTAs;
               // kDeepSeekV32 rows: their own 64-head kernel for every h, the rope on bf16 wgmma)
  kReference,  // plain CUDA-core f32 kernel (the GPU reference)
};
const char* sparse_mla_kernel_name(SparseMlaKernel kernel);

struct SparseMlaParams {
  int64_t num_tokens = 0;  // T
  int64_t num_kv = 0;      // N latent rows
  int num_heads = 128;     // h in {8, 16, 32, 64, 128}
  int d_qk = 576;          // 512 "nope" + 64 "rope"
  int d_v = 512;           // V = the first d_v columns of each kv row

  KvFormat kv_format = KvFormat::kE4m3;
  // kDeepSeekV32 with the FP8 kernel: how its bf16 q reaches the e4m3 tensor cores, 1 or 2.
  //   2 (default): two e4m3 terms, hi and the residual lo, at a scale per (token, head): scores
  //                within ~2^-8 of bf16 q's; out and lse err about as much as dequantising the rows
  //                to bf16 for a BF16 kernel (SPEC section 6).
  //   1:           one e4m3 term at a scale per (token, head) (amax / 448, never a fixed 1.0): a
  //                third fewer tensor-core steps a tile; scores within ~2^-4 of bf16 q's (SPEC 6).
  // The references (kReference, sparse_mla_cpu) and the kE4m3 rows (q already e4m3) ignore it.
  int q_terms = 2;

  // [T, h, d_qk], 16-byte aligned; e4m3 (kE4m3) or bf16 (kDeepSeekV32: set q_dtype = kBF16 too,
  // or validate() refuses the pair). Strides in elements.
  const void* q = nullptr;
  DType q_dtype = DType::kE4M3;
  // >= h * q_head_stride, 16-byte rows (a multiple of 16 / dtype bytes); 0 = h * q_head_stride
  int64_t q_token_stride = 0;
  int64_t q_head_stride = 0;   // >= d_qk, 16-byte rows; 0 = d_qk

  // [N] rows, 16-byte aligned: e4m3 [d_qk] (kE4m3) or the 656-byte V3.2 row (kDeepSeekV32).
  const void* kv = nullptr;
  DType kv_dtype = DType::kE4M3;  // e4m3 for both formats (the V3.2 row's nope type)
  // In bytes: >= the row size (576 / 656), a multiple of 16; 0 = the row size. Row offsets are 64-bit.
  int64_t kv_row_stride = 0;

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
// The spec in code: f64 on the dequantised inputs (either kv format), exact softmax. Host pointers.
// Dequantises only the kv rows the indices select; OutOfMemory where the host has not that much.
Status sparse_mla_cpu(const SparseMlaParams& params);
// Plain CUDA-core kernel, f32. Device pointers.
Status sparse_mla_gpu(const SparseMlaParams& params);
}  // namespace reference

}  // namespace fp8dsa
