// Stage 1: FP8 indexer scoring (SPEC section 1).
//
//   logits[t, s] = k_scale[s] * sum_h w[t, h] * relu(dot(q[t, h, :], k[s, :]))   for ks[t] <= s < ke[t]
//
// Every pointer is a device pointer for the GPU entry points and a host pointer for the CPU
// reference. Strides are in elements; a stride of 0 means "packed" (see resolved()). Row starts
// must be 16-byte aligned (TMA and vector loads / stores): e4m3 strides a multiple of 16, the f32
// logits stride a multiple of 4.
//
// validate() checks every field but reads no tensor. Data values are the caller's: NaN in q, k, w
// or k_scale is not detected and makes the logits it reaches unspecified (NaN in the CPU
// reference, NaN or a finite value on the GPU); ks / ke may hold any value (clamped, see below).
#pragma once

#include <cstdint>
#include <span>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "fp8dsa/types.h"

namespace fp8dsa {

enum class IndexerKernel : int {
  kAuto = 0,    // the measured router picks (indexer_route)
  kQResident,   // Q-resident / K-streaming prefill scorer: 128 / H tokens per CTA, every key streams
  kKResident,   // K-resident scorer: a key tile stays, tokens stream (decode, few tokens)
  kReference,   // plain CUDA-core f32 kernel (the GPU reference)
};
const char* indexer_kernel_name(IndexerKernel kernel);

struct IndexerParams {
  int64_t num_tokens = 0;  // T
  int64_t num_keys = 0;    // N
  int num_heads = 64;      // H in {4, 8, 16, 32, 64}
  int head_dim = 128;      // D in {64, 128}

  const void* q = nullptr;  // [T, H, D], 16-byte aligned; heads packed (head stride D)
  DType q_dtype = DType::kE4M3;
  int64_t q_token_stride = 0;  // >= H * D, a multiple of 16; 0 = H * D

  const float* w = nullptr;  // [T, H] f32; query scale and softmax scale folded in; may be negative
  int64_t w_token_stride = 0;  // >= H; 0 = H

  const void* k = nullptr;  // [N, D], 16-byte aligned
  DType k_dtype = DType::kE4M3;
  int64_t k_row_stride = 0;  // >= D, a multiple of 16; 0 = D

  const float* k_scale = nullptr;  // [N] f32 per-key dequant scale

  const int32_t* ks = nullptr;  // [T] first key row token t scores (inclusive)
  const int32_t* ke = nullptr;  // [T] end of the range (exclusive); bounds are clamped to [0, N]

  float* logits = nullptr;   // [T, logits_stride] f32, 16-byte aligned
  // >= N, a multiple of 4 (16-byte rows); 0 = N (packed), which therefore needs N % 4 == 0: for
  // other N pass min_logits_stride(N).
  int64_t logits_stride = 0;
  bool fill_masked = false;  // write -inf to cells outside [ks, ke); otherwise they are untouched
  // H = 64, Q-resident scorer: sum_h w relu(x) as (sum_h w x + sum_h w |x|) / 2, the first half on
  // the tensor cores (SPEC section 1): faster at N >= 32K, logits a few 1e-4 of max|logit| from the
  // exact form's, and a top-k that agrees a little less with the exact one than DeepGEMM's does.
  // Off (the default): the exact epilogue. Any other H and the K-resident scorer ignore it.
  bool split_epilogue = false;

  IndexerKernel kernel = IndexerKernel::kAuto;
  cudaStream_t stream = nullptr;

  // A copy with every 0 ("packed") stride replaced by its packed value.
  IndexerParams resolved() const;
};

// Checks every argument a caller can get wrong; runs on the CPU, touches no pointed-to memory.
// The smallest valid logits_stride for rows of num_keys logits: num_keys rounded up to the 16-byte rows'
// multiple of 4 (num_keys in [0, INT64_MAX - 3]).
inline constexpr int64_t kLogitsRowMultiple = 4;
constexpr int64_t min_logits_stride(int64_t num_keys) {
  return (num_keys + kLogitsRowMultiple - 1) / kLogitsRowMultiple * kLogitsRowMultiple;
}

Status validate(const IndexerParams& params);

// The kernel kAuto resolves to for this shape (the measured routing table, see
// bench/journal/2026-11-29.md).
IndexerKernel indexer_route(const IndexerParams& params);

// Fast path on the GPU (params.kernel selects; kAuto routes). Asynchronous on params.stream.
Status indexer_logits(const IndexerParams& params);

// One sequence of a ragged prefill batch: `new_tokens` query tokens appended to `cached_keys` keys
// already in the cache. Its key rows are [base, base + cached_keys + new_tokens), where base is the
// total key count of the sequences before it; its tokens follow those of the sequences before it.
struct SequenceLayout {
  int64_t new_tokens = 0;
  int64_t cached_keys = 0;
};

// Causal guard: new token i of a sequence sees keys [base, base + cached_keys + i + 1).
// Writes ks/ke for every token (host arrays of length sum(new_tokens)); returns the key count N
// through *num_keys. Rejects negative sizes and totals that overflow int32.
Status build_causal_bounds(std::span<const SequenceLayout> sequences, int32_t* ks, int32_t* ke,
                           int64_t* num_tokens, int64_t* num_keys);

namespace reference {
// The spec in code: f64 accumulation over the exact e4m3 values, multi-threaded. Host pointers.
// Dequantises a tile of k and one token's q at a time (never a copy of the whole input).
Status indexer_logits_cpu(const IndexerParams& params);
// Plain CUDA-core kernel, f32 accumulation. Device pointers; asynchronous on params.stream.
Status indexer_logits_gpu(const IndexerParams& params);
}  // namespace reference

}  // namespace fp8dsa
