// GPU reference for the indexer (SPEC section 1): plain CUDA cores, f32 FMA over the decoded e4m3
// values. One thread per key; the block's threads keep their key rows decoded in registers and walk
// the tokens, so each key row is read once per block however many tokens there are.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "core/no_throw.h"
#include "fp8dsa/indexer.h"

namespace fp8dsa::reference {
namespace {

constexpr int kKeysPerBlock = 128;         // one thread per key
constexpr int kMaxHeads = 64;              // SPEC: H in {4, 8, 16, 32, 64}
constexpr int kMaxTokenBlocks = 65535;     // gridDim.y limit; more tokens loop inside the block

__device__ __forceinline__ float decode_e4m3(uint8_t bits) {
  __nv_fp8_e4m3 v;
  v.__x = bits;
  return static_cast<float>(v);
}

__device__ __forceinline__ int64_t clamp_bound(int32_t bound, int64_t num_keys) {
  return bound < 0 ? 0 : (bound > num_keys ? num_keys : static_cast<int64_t>(bound));
}

template <int kHeadDim>
__global__ void __launch_bounds__(kKeysPerBlock) indexer_reference_kernel(IndexerParams p) {
  static_assert(kMaxHeads * kHeadDim * sizeof(float) <= 32 * 1024, "q tile must fit static smem");
  __shared__ float q_smem[kMaxHeads * kHeadDim];
  __shared__ float w_smem[kMaxHeads];

  const int64_t block_first_key = static_cast<int64_t>(blockIdx.x) * kKeysPerBlock;
  const int64_t s = block_first_key + threadIdx.x;
  const bool key_exists = s < p.num_keys;

  // The key row stays in registers (full unroll keeps the array out of local memory).
  float k_row[kHeadDim];
  const uint8_t* k_src = static_cast<const uint8_t*>(p.k) + (key_exists ? s * p.k_row_stride : 0);
#pragma unroll
  for (int d = 0; d < kHeadDim; ++d) k_row[d] = key_exists ? decode_e4m3(k_src[d]) : 0.0f;
  const float k_scale = key_exists ? p.k_scale[s] : 0.0f;

  const int qk_elems = p.num_heads * kHeadDim;
  for (int64_t t = blockIdx.y; t < p.num_tokens; t += gridDim.y) {
    const int64_t lo = clamp_bound(p.ks[t], p.num_keys);
    const int64_t hi = std::max(lo, clamp_bound(p.ke[t], p.num_keys));
    float* logits_row = p.logits + t * p.logits_stride;

    // Block-uniform: skipping here never splits the block across a __syncthreads.
    const bool block_overlaps = block_first_key < hi && block_first_key + kKeysPerBlock > lo;
    if (!block_overlaps) {
      if (p.fill_masked && key_exists) logits_row[s] = -INFINITY;
      continue;
    }

    __syncthreads();  // every thread is done with the previous token's q tile
    const uint8_t* q_src = static_cast<const uint8_t*>(p.q) + t * p.q_token_stride;
    for (int i = threadIdx.x; i < qk_elems; i += kKeysPerBlock) q_smem[i] = decode_e4m3(q_src[i]);
    for (int h = threadIdx.x; h < p.num_heads; h += kKeysPerBlock) w_smem[h] = p.w[t * p.w_token_stride + h];
    __syncthreads();

    if (!key_exists) continue;
    if (s < lo || s >= hi) {
      if (p.fill_masked) logits_row[s] = -INFINITY;
      continue;
    }
    float acc = 0.0f;
    for (int h = 0; h < p.num_heads; ++h) {
      const float* q_head = q_smem + h * kHeadDim;
      float dot = 0.0f;
#pragma unroll
      for (int d = 0; d < kHeadDim; ++d) dot = fmaf(q_head[d], k_row[d], dot);
      acc = fmaf(w_smem[h], dot > 0.0f ? dot : 0.0f, acc);
    }
    logits_row[s] = k_scale * acc;
  }
}

}  // namespace

static Status indexer_logits_gpu_unguarded(const IndexerParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  const IndexerParams p = params.resolved();
  if (p.q_dtype != DType::kE4M3 || p.k_dtype != DType::kE4M3) {
    return not_implemented(std::string("indexer reference: q/k must be e4m3 (got ") +
                           dtype_name(p.q_dtype) + "/" + dtype_name(p.k_dtype) + ")");
  }
  if (p.num_heads < 1 || p.num_heads > kMaxHeads) {
    return not_implemented("indexer reference: num_heads (" + std::to_string(p.num_heads) +
                           ") must be in [1, " + std::to_string(kMaxHeads) + "]");
  }
  if (p.num_tokens == 0 || p.num_keys == 0) return Status::ok();

  const int64_t key_blocks = (p.num_keys + kKeysPerBlock - 1) / kKeysPerBlock;
  if (key_blocks > INT32_MAX) return invalid_argument("indexer reference: num_keys too large");
  const dim3 grid(static_cast<unsigned>(key_blocks),
                  static_cast<unsigned>(std::min<int64_t>(p.num_tokens, kMaxTokenBlocks)));
  switch (p.head_dim) {
    case 64:
      return launch_kernel("indexer_reference_kernel<64>", indexer_reference_kernel<64>, grid, kKeysPerBlock, 0,
                           p.stream, p);
    case 128:
      return launch_kernel("indexer_reference_kernel<128>", indexer_reference_kernel<128>, grid, kKeysPerBlock, 0,
                           p.stream, p);
    default:
      return not_implemented("indexer reference: head_dim (" + std::to_string(p.head_dim) +
                             ") must be 64 or 128");
  }
}

Status indexer_logits_gpu(const IndexerParams& params) {
  return detail::no_throw("indexer GPU reference", [&] { return indexer_logits_gpu_unguarded(params); });
}

}  // namespace fp8dsa::reference
