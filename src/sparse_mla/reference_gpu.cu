// GPU reference for sparse MLA prefill (SPEC section 4): plain CUDA cores, f32, one block per
// (token, head). Keys are taken in chunks: warps score a chunk (one key per warp at a time, lanes
// split d_qk), then every thread folds the chunk into its d_v columns with an online softmax.
// No atomics and a fixed reduction order, so reruns are bitwise identical. One instantiation per
// kv format; a V3.2 row is dequantised element by element (e4m3 * block scale, bf16 rope) in f32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "core/no_throw.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::reference {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kKeysPerChunk = 256;
constexpr int kMaxDqk = 1024;
constexpr int kMaxDv = 1024;
constexpr int kVColsPerThread = kMaxDv / kThreads;
constexpr int kMaxTokenBlocks = INT32_MAX;
static_assert(kMaxDv % kThreads == 0, "each thread owns a fixed set of V columns");
static_assert(kKeysPerChunk % kWarps == 0, "warps split a chunk evenly");

__device__ __forceinline__ float decode_e4m3(uint8_t bits) {
  __nv_fp8_e4m3 v;
  v.__x = bits;
  return static_cast<float>(v);
}

// Column `col` (< d_qk) of a kv row, dequantised.
template <KvFormat kFormat>
__device__ __forceinline__ float kv_value(const uint8_t* row, int col) {
  if constexpr (kFormat == KvFormat::kE4m3) {
    return decode_e4m3(row[col]);
  } else {
    constexpr int kNope = kV32ScaleOffset;  // one e4m3 byte per nope column, then the scales
    const auto* rope = reinterpret_cast<const __nv_bfloat16*>(row + kV32RopeOffset);
    if (col >= kNope) return __bfloat162float(rope[col - kNope]);
    const float scale = reinterpret_cast<const float*>(row + kV32ScaleOffset)[col / kV32ScaleBlock];
    return decode_e4m3(row[col]) * scale;
  }
}

// Element `offset` of q, dequantised.
template <KvFormat kFormat>
__device__ __forceinline__ float q_value(const void* q, int64_t offset) {
  if constexpr (kFormat == KvFormat::kE4m3) {
    return decode_e4m3(static_cast<const uint8_t*>(q)[offset]);
  } else {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(q)[offset]);
  }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <KvFormat kFormat>
__global__ void __launch_bounds__(kThreads) sparse_mla_reference_kernel(SparseMlaParams p) {
  __shared__ float q_smem[kMaxDqk];
  __shared__ float score_smem[kKeysPerChunk];
  __shared__ int32_t index_smem[kKeysPerChunk];  // -1 marks an invalid key

  const int head = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint8_t* kv = static_cast<const uint8_t*>(p.kv);
  const float score_scale = p.q_scale * p.kv_scale * p.sm_scale;

  for (int64_t t = blockIdx.x; t < p.num_tokens; t += gridDim.x) {
    __syncthreads();  // the previous token's q tile is no longer read
    const int64_t q_row = t * p.q_token_stride + head * p.q_head_stride;
    for (int d = threadIdx.x; d < p.d_qk; d += kThreads) q_smem[d] = q_value<kFormat>(p.q, q_row + d);

    int length = p.topk;
    if (p.topk_length) length = std::clamp(p.topk_length[t], 0, p.topk);
    const int32_t* token_indices = p.indices + t * p.indices_stride;

    float running_max = -INFINITY, running_sum = 0.0f;
    bool nan_score = false;  // a NaN score makes the row's out, lse and max_logits NaN (header)
    float acc[kVColsPerThread];
#pragma unroll
    for (int c = 0; c < kVColsPerThread; ++c) acc[c] = 0.0f;

    for (int chunk = 0; chunk < length; chunk += kKeysPerChunk) {
      __syncthreads();  // q tile written / previous chunk's scores consumed
      for (int j = warp; j < kKeysPerChunk; j += kWarps) {
        const int pos = chunk + j;
        const int32_t idx = pos < length ? token_indices[pos] : -1;
        const bool valid = idx >= 0 && idx < p.num_kv;
        float score = -INFINITY;
        if (valid) {
          const uint8_t* kv_row = kv + static_cast<int64_t>(idx) * p.kv_row_stride;
          float partial = 0.0f;
          for (int d = lane; d < p.d_qk; d += 32) partial = fmaf(q_smem[d], kv_value<kFormat>(kv_row, d), partial);
          score = score_scale * warp_sum(partial);
        }
        if (lane == 0) {
          score_smem[j] = score;
          index_smem[j] = valid ? idx : -1;
        }
      }
      __syncthreads();

      // Every thread folds the same scores in the same order, so all agree on max and sum.
      float chunk_max = -INFINITY;
      for (int j = 0; j < kKeysPerChunk; ++j)
        if (index_smem[j] >= 0) {
          nan_score = nan_score || isnan(score_smem[j]);
          chunk_max = fmaxf(chunk_max, score_smem[j]);
        }
      if (chunk_max == -INFINITY) continue;
      const float new_max = fmaxf(running_max, chunk_max);
      const float rescale = expf(running_max - new_max);  // 0 on the first valid chunk
      running_sum *= rescale;
#pragma unroll
      for (int c = 0; c < kVColsPerThread; ++c) acc[c] *= rescale;
      for (int j = 0; j < kKeysPerChunk; ++j) {
        const int32_t idx = index_smem[j];
        if (idx < 0) continue;
        const float prob = expf(score_smem[j] - new_max);
        running_sum += prob;
        const uint8_t* v_row = kv + static_cast<int64_t>(idx) * p.kv_row_stride;
#pragma unroll
        for (int c = 0; c < kVColsPerThread; ++c) {
          const int col = threadIdx.x + c * kThreads;
          if (col < p.d_v) acc[c] = fmaf(prob, kv_value<kFormat>(v_row, col), acc[c]);
        }
      }
      running_max = new_max;
    }

    if (nan_score) running_max = NAN;  // fmaxf skipped it
    const bool any_valid = running_max != -INFINITY;
    const float lse = any_valid ? running_max + logf(running_sum) : INFINITY;
    float out_scale = 0.0f;
    if (any_valid) {
      // exp(lse) / (exp(lse) + exp(sink)) without overflow; sink = +inf gives 0, -inf gives 1.
      const float sink_factor = p.attn_sink ? 1.0f / (1.0f + expf(p.attn_sink[head] - lse)) : 1.0f;
      out_scale = p.kv_scale * sink_factor / running_sum;
    }
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + t * p.out_token_stride + head * p.out_head_stride;
#pragma unroll
    for (int c = 0; c < kVColsPerThread; ++c) {
      const int col = threadIdx.x + c * kThreads;
      if (col < p.d_v) out[col] = __float2bfloat16_rn(acc[c] * out_scale);
    }
    if (threadIdx.x == 0) {
      const int64_t row = t * p.num_heads + head;
      p.lse[row] = lse;
      if (p.max_logits) p.max_logits[row] = running_max;
    }
  }
}

}  // namespace

static Status sparse_mla_gpu_unguarded(const SparseMlaParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  const SparseMlaParams p = params.resolved();
  const DType q_dtype = p.kv_format == KvFormat::kDeepSeekV32 ? DType::kBF16 : DType::kE4M3;
  if (p.q_dtype != q_dtype || p.kv_dtype != DType::kE4M3 || p.out_dtype != DType::kBF16) {
    return not_implemented(std::string("sparse_mla reference: needs ") + dtype_name(q_dtype) +
                           " q, e4m3 kv and bf16 out (got " + dtype_name(p.q_dtype) + "/" +
                           dtype_name(p.kv_dtype) + " -> " + dtype_name(p.out_dtype) + ")");
  }
  if (p.d_qk < 1 || p.d_qk > kMaxDqk || p.d_v < 1 || p.d_v > std::min(p.d_qk, kMaxDv)) {
    return not_implemented("sparse_mla reference: d_qk (" + std::to_string(p.d_qk) + ") / d_v (" +
                           std::to_string(p.d_v) + ") outside the supported range");
  }
  if (p.num_heads < 1 || p.num_heads > 65535) {
    return invalid_argument("sparse_mla reference: num_heads (" + std::to_string(p.num_heads) +
                            ") out of range");
  }
  if (p.num_tokens == 0) return Status::ok();
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(p.num_tokens, kMaxTokenBlocks)),
                  static_cast<unsigned>(p.num_heads));
  if (p.kv_format == KvFormat::kDeepSeekV32) {
    return launch_kernel("sparse_mla_reference_kernel<V3.2>", sparse_mla_reference_kernel<KvFormat::kDeepSeekV32>,
                         grid, kThreads, 0, p.stream, p);
  }
  return launch_kernel("sparse_mla_reference_kernel", sparse_mla_reference_kernel<KvFormat::kE4m3>, grid, kThreads, 0,
                       p.stream, p);
}

Status sparse_mla_gpu(const SparseMlaParams& params) {
  return detail::no_throw("sparse_mla GPU reference", [&] { return sparse_mla_gpu_unguarded(params); });
}

}  // namespace fp8dsa::reference
