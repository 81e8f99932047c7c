// The fill_masked option: -inf in every cell of a row outside the row's clamped [ks, ke). A
// separate pass so the scorers only ever touch key tiles that hold valid cells; it runs after the
// scorer, overlapped with the scorer's last CTAs (the cells are disjoint from the scorer's).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "hopper/grid_dependency.cuh"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {
namespace {

// One warp a CTA, at most 32 registers: beside a wide Q-resident scorer CTA (384 threads x 168
// registers = 64512 of an SM's 65536, ~135 KB of shared memory) there is room for exactly one, so
// the fill runs on every SM while the scorer's last wave does, not after it; the other CTAs of the
// grid (4 an SM) take SMs as the scorer's CTAs leave them. H200, T = 4096 causal, same binary
// (bench/journal/2026-12-02.md, tenth session): the fill adds 2.7 / 3.1 us to the scorer at N = 8K,
// H = 64 / 32, against 13 us run after it; alone it takes 13 us (one CTA an SM: 18 us). Plain
// stores: bulk copies of a shared -inf tile share the TMA unit with the scorer's K loads and ran
// slower beside it.
constexpr int kThreads = 32;

// -inf into row[lo, hi): scalar cells up to the first 16-byte boundary, float4 stores, scalar tail
// (rows start 16-byte aligned: logits_stride is a multiple of 4).
__device__ __forceinline__ void fill_range(float* row, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  const int64_t aligned_lo = std::min(hi, (lo + 3) & ~int64_t{3});
  const int64_t aligned_hi = std::max(aligned_lo, hi & ~int64_t{3});
  for (int64_t k = lo + threadIdx.x; k < aligned_lo; k += kThreads) row[k] = -INFINITY;
  const float4 minus_inf = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  float4* vectors = reinterpret_cast<float4*>(row + aligned_lo);
  const int64_t num_vectors = (aligned_hi - aligned_lo) / 4;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < num_vectors; i += kThreads) vectors[i] = minus_inf;
  for (int64_t k = aligned_hi + threadIdx.x; k < hi; k += kThreads) row[k] = -INFINITY;
}

// Rows t = blockIdx.x, + gridDim.x, ... (neighbouring rows, whose masked lengths are alike under a
// causal guard, go to different CTAs), 32 at a time: lane j loads the bounds of the j-th, so that
// one load latency covers 32 rows (a row's bounds loaded in turn cost 22 us against 18 at T = 4096
// over 132 CTAs). Only the cells outside [ks, ke) are touched, so the pass costs the
// masked bytes. Launched as a programmatic dependent of the scorer (launch_programmatic_dependent):
// it starts once every scorer CTA has started, and waits for the scorer at its end, so that what
// follows on the stream sees both. Sizes are below 2^31 (SPEC 1).
__global__ void __maxnreg__(32)
    fill_masked_kernel(const int32_t* ks, const int32_t* ke, float* logits, int64_t num_tokens, int64_t num_keys,
                       int64_t logits_stride) {
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t step = gridDim.x;
  for (int64_t first = blockIdx.x; first < num_tokens; first += kThreads * step) {
    const int64_t mine = first + lane * step;
    int32_t s = 0, e = 0;
    if (mine < num_tokens) {
      s = static_cast<int32_t>(std::clamp<int64_t>(ks[mine], 0, num_keys));
      e = static_cast<int32_t>(std::max<int64_t>(s, std::clamp<int64_t>(ke[mine], 0, num_keys)));
    }
    const int rows = static_cast<int>(std::min<int64_t>(kThreads, (num_tokens - first + step - 1) / step));
    for (int j = 0; j < rows; ++j) {
      const int64_t row_s = __shfl_sync(0xFFFFFFFFu, s, j);
      const int64_t row_e = __shfl_sync(0xFFFFFFFFu, e, j);
      float* row = logits + (first + j * step) * logits_stride;
      fill_range(row, 0, row_s);
      fill_range(row, row_e, num_keys);
    }
  }
  hopper::wait_prerequisite_grids();
}

}  // namespace

Status fill_masked_cells(const IndexerParams& p, FillLaunch launch) {
  if (p.num_tokens == 0 || p.num_keys == 0) return Status::ok();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(p.num_tokens, 4 * int64_t{device_sm_count()}));
  if (launch == FillLaunch::kSerial) {
    return launch_kernel("fill_masked_kernel", fill_masked_kernel, grid, kThreads, 0, p.stream, p.ks, p.ke, p.logits,
                         p.num_tokens, p.num_keys, p.logits_stride);
  }
  return launch_programmatic_dependent("fill_masked_kernel", fill_masked_kernel, grid, kThreads, 0, p.stream, p.ks,
                                       p.ke, p.logits, p.num_tokens, p.num_keys, p.logits_stride);
}

}  // namespace fp8dsa::detail::indexer
