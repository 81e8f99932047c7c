// The producer side of the FP8 sparse MLA kernel: 16-byte cp.async copies of whole 576-byte e4m3
// rows into K-major SW64 tiles. There is no TMA gather on Hopper; an invalid row (index < 0, >= N,
// or past the token's topk_length) is zero-filled without reading global memory.
#pragma once

#include <cstdint>

#include "hopper/cp_async.cuh"
#include "hopper/swizzle.h"
#include "sparse_mla/config.h"

namespace fp8dsa::sparse_mla {

// Rows per pass of the 128 producer threads: 4 threads per row, 9 chunks of 16 bytes each.
constexpr int kGatherThreadsPerRow = 4;
constexpr int kGatherRowsPerPass = 128 / kGatherThreadsPerRow;
constexpr int kGatherChunksPerThread = Fp8Config::kDqk / 16 / kGatherThreadsPerRow;
static_assert(Fp8Config::kDqk % (16 * kGatherThreadsPerRow) == 0, "chunks split evenly over a row's threads");
static_assert(Fp8Config::kKeysPerTile % kGatherRowsPerPass == 0, "passes cover the tile");

// Copies row `src` into row `row` of the kRows-row tile at `tile`, or zero-fills it when !valid
// (src must still be a mapped address). Thread `quarter` (0..3) takes chunks quarter, quarter + 4,
// ...: a warp's 16-byte writes cover 8 rows x 64 bytes, which SW64 spreads over all banks.
template <int kRows = Fp8Config::kKeysPerTile>
__device__ __forceinline__ void gather_row(uint32_t tile, int row, const uint8_t* src, bool valid,
                                           int quarter) {
#pragma unroll
  for (int i = 0; i < kGatherChunksPerThread; ++i) {
    const int chunk = quarter + kGatherThreadsPerRow * i;
    const uint32_t dst = tile + hopper::kmajor_offset(hopper::Swizzle::k64B, kRows, row, chunk * 16);
    hopper::cp_async_16_zfill(dst, valid ? src + chunk * 16 : src, valid);
  }
}

}  // namespace fp8dsa::sparse_mla
