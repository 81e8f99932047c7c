// One CTA per row: exact radix select with the row read once from DRAM.
//
//   pass 1  row (global) -> level-0 histogram (top 11 bits); the row's keys are kept in shared
//           memory as far as they fit (the rest is re-read later, mostly from L2)
//   pass 2  row -> keys of higher buckets selected outright (index order), keys of the threshold
//           bucket into a candidate list and the level-1 histogram
//   then    levels 1 and 2 and the final pick over the candidates only; a threshold bucket larger
//           than kCandidateCap is refined by re-scanning the row instead (never truncated)
//   write   the k (key, index) pairs, optionally radix-sorted by key, through the page table
#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk/radix_select.cuh"
#include "topk/row_select.cuh"

namespace fp8dsa::detail::topk {
namespace {

template <int kThreads>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads)
    topk_row_kernel(const TopkParams p, uint32_t cache_cap_vecs) {
  extern __shared__ uint4 smem_dyn[];
  static_assert(row_smem_head_bytes<kThreads>() % 16 == 0, "the row cache is 16-byte aligned");
  auto& s = *reinterpret_cast<RowSmem<kThreads>*>(smem_dyn);
  uint4* cache = smem_dyn + row_smem_head_bytes<kThreads>() / 16;

  const int64_t row = blockIdx.x;
  const RowRange range = row_range(p, row);
  const float* first = p.logits + row * p.logits_stride + range.ks;
  uint32_t count;
  if (range.len <= static_cast<uint32_t>(p.k)) {
    stage_whole_row<kThreads>(p, first, range.len, s);
    count = range.len;
  } else {
    select_row<kThreads>(p, first, range.len, s, cache, cache_cap_vecs);
    count = static_cast<uint32_t>(p.k);
  }
  __syncthreads();
  write_row<kThreads>(p, row, range.ks, count, s);
}

// The current device's opt-in shared memory per block (0 when it cannot be queried).
int max_dynamic_smem() {
  int dev = 0, value = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return value;
}

template <int kThreads>
Status launch_row(const TopkParams& p, int64_t cache_keys) {
  const size_t head = row_smem_head_bytes<kThreads>();
  const int64_t limit_vecs = (static_cast<int64_t>(max_dynamic_smem()) - static_cast<int64_t>(head)) / 16;
  if (limit_vecs < 0) {
    return {StatusCode::kUnsupportedDevice, "topk: the device's shared memory per block is below the kernel's " +
                                                std::to_string(head) + " bytes"};
  }
  // A row spans at most (N + 3) / 4 + 1 vectors (its start may be misaligned).
  const int64_t row_vecs = (p.num_keys + 3) / 4 + 1;
  const int64_t want_vecs = cache_keys < 0 ? row_vecs : (cache_keys + 3) / 4;
  const int64_t cache_vecs = std::min({want_vecs, row_vecs, limit_vecs});
  const size_t smem = head + static_cast<size_t>(cache_vecs) * 16;
  return launch_kernel("topk_row_kernel", topk_row_kernel<kThreads>, static_cast<unsigned>(p.num_rows), kThreads, smem,
                       p.stream, p, static_cast<uint32_t>(cache_vecs));
}

}  // namespace

Status launch_row_kernel(const TopkParams& p, int threads, int64_t cache_keys) {
  if (p.num_rows == 0) return Status::ok();
  switch (threads) {
    case 512:
      return launch_row<512>(p, cache_keys);
    case 1024:
      return launch_row<1024>(p, cache_keys);
    default:
      return invalid_argument("topk: row kernel threads must be 512 or 1024, got " + std::to_string(threads));
  }
}

}  // namespace fp8dsa::detail::topk
