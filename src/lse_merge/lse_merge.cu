// lse_merge on the GPU (fp8dsa/lse_merge.h): memory-bound, 64 threads per (token, head) row, each
// 8 of its 512 columns as 16-byte bf16 loads of every counting part; the row arithmetic in f32 by
// merge_weights.h, the same code the f64 reference runs. A fixed part order: reruns are bitwise
// identical.
#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "core/no_throw.h"
#include "fp8dsa/lse_merge.h"
#include "lse_merge/merge_weights.h"

namespace fp8dsa {
namespace {

constexpr int kColumnsPerThread = 8;
constexpr int kThreadsPerRow = 512 / kColumnsPerThread;
constexpr int kRowsPerBlock = 4;
constexpr int kThreads = kThreadsPerRow * kRowsPerBlock;
constexpr int64_t kMaxBlocks = 1 << 20;  // a grid-stride loop covers the rest

__global__ void __launch_bounds__(kThreads) lse_merge_kernel(const LseMergeParams p) {
  const int64_t rows = p.num_tokens * p.num_heads;
  const int column = (threadIdx.x % kThreadsPerRow) * kColumnsPerThread;
  const auto* parts = static_cast<const __nv_bfloat16*>(p.out_parts);
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  for (int64_t row = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / kThreadsPerRow; row < rows;
       row += int64_t{gridDim.x} * kRowsPerBlock) {
    const int64_t t = row / p.num_heads, head = row % p.num_heads;
    const float lse = detail::lse_merge::merged_lse<float>(p.lse_parts + row, rows, p.num_parts);
    float acc[kColumnsPerThread] = {};
    for (int r = 0; r < p.num_parts; ++r) {
      const float w = detail::lse_merge::part_weight<float>(p.lse_parts[r * rows + row], lse);
      if (w == 0.0f) continue;
      const uint4 raw = *reinterpret_cast<const uint4*>(parts + r * p.part_stride + t * p.token_stride +
                                                        head * p.head_stride + column);
      const auto* v = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int i = 0; i < kColumnsPerThread / 2; ++i) {
        const float2 f = __bfloat1622float2(v[i]);
        acc[2 * i] = fmaf(w, f.x, acc[2 * i]);
        acc[2 * i + 1] = fmaf(w, f.y, acc[2 * i + 1]);
      }
    }
    const float sink = p.attn_sink != nullptr ? p.attn_sink[head] : -INFINITY;
    const float factor = detail::lse_merge::sink_factor<float>(lse, sink);
    uint32_t words[kColumnsPerThread / 2];
#pragma unroll
    for (int i = 0; i < kColumnsPerThread / 2; ++i) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(acc[2 * i] * factor, acc[2 * i + 1] * factor);
      words[i] = *reinterpret_cast<const uint32_t*>(&b);
    }
    *reinterpret_cast<uint4*>(out + t * p.out_token_stride + head * p.out_head_stride + column) =
        make_uint4(words[0], words[1], words[2], words[3]);
    if (column == 0) {
      p.lse[row] = lse;
      if (p.max_logits != nullptr) {
        p.max_logits[row] = detail::lse_merge::merged_max_logit(p.max_logits_parts + row, rows, p.num_parts);
      }
    }
  }
}

Status lse_merge_unguarded(const LseMergeParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  const LseMergeParams p = params.resolved();
  const int64_t rows = p.num_tokens * p.num_heads;
  if (rows == 0) return Status::ok();
  const int64_t blocks = std::min<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, kMaxBlocks);
  return launch_kernel("lse_merge_kernel", lse_merge_kernel, static_cast<unsigned>(blocks), kThreads, 0, p.stream, p);
}

}  // namespace

Status lse_merge(const LseMergeParams& params) {
  return detail::no_throw("lse_merge", [&] { return lse_merge_unguarded(params); });
}

}  // namespace fp8dsa
