// The fill_masked option: -inf in every cell of a row outside the row's clamped [ks, ke). A
// separate pass so the scorers only ever touch key tiles that hold valid cells.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxRowBlocks = 65535 * 16;

// -inf into row[lo, hi): scalar cells up to the first 16-byte boundary, float4 stores, scalar tail
// (rows start 16-byte aligned: ldl is a multiple of 4).
__device__ __forceinline__ void fill_range(float* row, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  const int64_t aligned_lo = std::min(hi, (lo + 3) & ~int64_t{3});
  const int64_t aligned_hi = std::max(aligned_lo, hi & ~int64_t{3});
  for (int64_t k = lo + threadIdx.x; k < aligned_lo; k += kThreads) row[k] = -INFINITY;
  const float4 minus_inf = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  for (int64_t k = aligned_lo + 4 * static_cast<int64_t>(threadIdx.x); k < aligned_hi; k += 4 * kThreads) {
    *reinterpret_cast<float4*>(row + k) = minus_inf;
  }
  for (int64_t k = aligned_hi + threadIdx.x; k < hi; k += kThreads) row[k] = -INFINITY;
}

// One CTA per row (rows in turn past the grid): only the cells outside [ks, ke) are touched, so
// the pass costs the masked bytes, not a thread per cell of [T, N] (about 1 ms at T = 4096, N = 64K
// when every cell had its thread).
__global__ void __launch_bounds__(kThreads) fill_masked_kernel(const int32_t* ks, const int32_t* ke,
                                                               float* logits, int64_t num_tokens,
                                                               int64_t num_keys, int64_t ldl) {
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const int64_t s = std::clamp<int64_t>(ks[t], 0, num_keys);
    const int64_t e = std::max(s, std::clamp<int64_t>(ke[t], 0, num_keys));
    float* row = logits + t * ldl;
    fill_range(row, 0, s);
    fill_range(row, e, num_keys);
  }
}

}  // namespace

Status fill_masked_cells(const IndexerParams& p) {
  if (p.num_tokens == 0 || p.num_keys == 0) return Status::ok();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(p.num_tokens, kMaxRowBlocks));
  return launch_kernel("fill_masked_kernel", fill_masked_kernel, grid, kThreads, 0, p.stream, p.ks, p.ke, p.logits,
                       p.num_tokens, p.num_keys, p.ldl);
}

}  // namespace fp8dsa::detail::indexer
