// The fill_masked option: -inf in every cell of a row outside the row's clamped [ks, ke). A
// separate pass so the scorers only ever touch key tiles that hold valid cells.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "indexer/scorers.h"

namespace fp8dsa::indexer_detail {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRowBlocks = 65535;

__global__ void __launch_bounds__(kThreads) fill_masked_kernel(const int32_t* ks, const int32_t* ke,
                                                               float* logits, int64_t num_tokens,
                                                               int64_t num_keys, int64_t ldl) {
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    const int64_t s = std::clamp<int64_t>(ks[t], 0, num_keys);
    const int64_t e = std::max(s, std::clamp<int64_t>(ke[t], 0, num_keys));
    float* row = logits + t * ldl;
    for (int64_t key = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; key < num_keys;
         key += static_cast<int64_t>(gridDim.x) * kThreads) {
      if (key < s || key >= e) row[key] = -INFINITY;
    }
  }
}

}  // namespace

Status fill_masked_cells(const IndexerParams& p) {
  if (p.num_tokens == 0 || p.num_keys == 0) return Status::ok();
  const int64_t key_blocks = std::min<int64_t>((p.num_keys + kThreads - 1) / kThreads, 1024);
  const dim3 grid(static_cast<unsigned>(key_blocks),
                  static_cast<unsigned>(std::min<int64_t>(p.num_tokens, kMaxRowBlocks)));
  fill_masked_kernel<<<grid, kThreads, 0, p.stream>>>(p.ks, p.ke, p.logits, p.num_tokens, p.num_keys, p.ldl);
  FP8DSA_RETURN_IF_LAUNCH_FAILED("fill_masked_kernel");
  return Status::ok();
}

}  // namespace fp8dsa::indexer_detail
