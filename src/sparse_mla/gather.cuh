// Gathering KV rows (and Q) into shared memory: 16-byte cp.async copies of 576-byte e4m3 rows into
// K-major SW64 tiles. There is no TMA gather on Hopper; an invalid row (index < 0, >= N, or past
// the token's topk_length) is zero-filled without reading global memory.
#pragma once

#include <cstdint>

#include "hopper/cp_async.cuh"
#include "hopper/swizzle.h"
#include "sparse_mla/config.h"
#include "sparse_mla/kernel_args.h"
#include "sparse_mla/pipeline.cuh"

namespace fp8dsa::detail::sparse_mla {

// The first position of this CTA's part of its token's list (KernelArgs::part_keys).
__device__ __forceinline__ int part_begin(const KernelArgs& p) { return static_cast<int>(blockIdx.y) * p.part_keys; }

// The CTA's part of the token's index list: positions from part_begin(p) on.
__device__ __forceinline__ const int32_t* token_indices(const KernelArgs& p, int64_t token) {
  return p.indices + token * p.indices_stride + part_begin(p);
}

// The positions of the CTA's part that are in the token's list (topk_length clamped to [0, topk]).
__device__ __forceinline__ int token_length(const KernelArgs& p, int64_t token) {
  const int length = p.topk_length == nullptr ? p.topk : min(max(p.topk_length[token], 0), p.topk);
  return min(max(length - part_begin(p), 0), p.part_keys);
}

__device__ __forceinline__ int tile_count(int length) {
  return (length + MlaShape::kKeysPerTile - 1) / MlaShape::kKeysPerTile;
}

__device__ __forceinline__ bool index_valid(int32_t idx, int64_t num_kv) { return idx >= 0 && idx < num_kv; }

// The index at position pos of the token's list, -1 past its length.
__device__ __forceinline__ int32_t index_at(const int32_t* token_indices, int pos, int length) {
  return pos < length ? __ldg(token_indices + pos) : -1;
}

// Rows per pass of 128 threads with 4 threads per row. Thread `quarter` (0..3) of a row takes
// 16-byte chunk `quarter` of each 64-byte atom it copies: a warp's writes then cover 8 rows x 64
// bytes, which SW64 spreads over all banks, and each row's global reads are whole 32-byte sectors.
constexpr int kGatherThreadsPerRow = 4;
constexpr int kGatherRowsPerPass = 128 / kGatherThreadsPerRow;
constexpr int kAtomsPerRow = MlaShape::kDqk / static_cast<int>(MlaShape::kSwizzleBytes);

// How gather_row addresses a row's nine 16-byte copies. kImmediate: the atoms differ by constants on
// both sides (SW64 swizzles address bits 4-5 with bits 7-8, which an atom's kRows * 64 bytes leave
// alone), so that each copy is one LDGSTS with immediate offsets. kPerAtom: each atom's addresses
// computed in registers, where every copy waits for the previous one to read its register.
enum class RowCopy { kPerAtom, kImmediate };

// Copies the whole row `src` into row `row` of the kRows-row tile at `tile`, or zero-fills it when
// !valid (src must still be a mapped address: it is read from only when valid).
template <int kRows, RowCopy kCopy>
__device__ __forceinline__ void gather_row(uint32_t tile, int row, const uint8_t* src, bool valid, int quarter) {
  if constexpr (kCopy == RowCopy::kImmediate) {
    static_assert(kRows % 8 == 0, "an atom's rows * 64 bytes must keep the swizzle's row bits");
    const uint32_t dst = tile + hopper::kmajor_offset(hopper::Swizzle::k64B, kRows, row, quarter * 16);
    const uint8_t* chunk = src + quarter * 16;
#pragma unroll
    for (int atom = 0; atom < kAtomsPerRow; ++atom) {
      hopper::cp_async_16_zfill(dst + atom * kRows * 64, chunk + atom * 64, valid);
    }
  } else {
#pragma unroll
    for (int atom = 0; atom < kAtomsPerRow; ++atom) {
      const int col = atom * 64 + quarter * 16;
      const uint32_t dst = tile + hopper::kmajor_offset(hopper::Swizzle::k64B, kRows, row, col);
      hopper::cp_async_16_zfill(dst, valid ? src + col : src, valid);
    }
  }
}

// A producer thread's rows of a 64-key tile: one in each pass of kGatherRowsPerPass rows.
constexpr int kTilePasses = MlaShape::kKeysPerTile / kGatherRowsPerPass;

// The key indices of those rows in tile `tile` of a token's list (-1 past `length`: no load).
__device__ __forceinline__ void load_tile_indices(const int32_t* indices, int tile, int length, int row_in_pass,
                                                  int32_t (&idx)[kTilePasses]) {
#pragma unroll
  for (int pass = 0; pass < kTilePasses; ++pass) {
    idx[pass] = index_at(indices, tile * MlaShape::kKeysPerTile + pass * kGatherRowsPerPass + row_in_pass, length);
  }
}

// The ring's tile `ring_tile` into its stage of the kNumKStages-stage ring at `ring` once the stage
// is free (empty[s]): the thread's rows from idx (invalid ones zero-filled), then its arrival on
// full[s] once its copies land.
template <int kNumKStages, RowCopy kCopy>
__device__ __forceinline__ void fill_ring_stage(const KernelArgs& p, uint32_t ring, uint64_t* full, uint64_t* empty,
                                                int ring_tile, const int32_t (&idx)[kTilePasses], int row_in_pass,
                                                int quarter) {
  const int stage = ring_tile % kNumKStages;
  if (ring_tile >= kNumKStages) wait_barrier(&empty[stage], ((ring_tile / kNumKStages) - 1) & 1);
  const uint32_t k_tile = ring + stage * MlaShape::kKTileBytes;
#pragma unroll
  for (int pass = 0; pass < kTilePasses; ++pass) {
    const bool valid = index_valid(idx[pass], p.num_kv);
    const uint8_t* src = p.kv + (valid ? int64_t{idx[pass]} * p.kv_row_stride : 0);
    gather_row<MlaShape::kKeysPerTile, kCopy>(k_tile, pass * kGatherRowsPerPass + row_in_pass, src, valid, quarter);
  }
  hopper::cp_async_mbarrier_arrive_noinc(&full[stage]);
}

// The seesaw kernel's producer warpgroup: the kQRows rows of Q from q (its first head; rows from
// q_rows on zero-filled), then tiles [0, num_tiles) of the token into the kNumKStages-stage ring at
// kKOffset (full[s]: 128 cp.async arrivals; empty[s]: as many arrivals as the consumers give). A
// tile's indices are loaded while the previous tile's copies are issued (so that a stage already
// free does not wait for them) and its rows copied with RowCopy::kImmediate: 1.3-2% faster than
// loading them just before the stage's wait with RowCopy::kPerAtom (either half alone: 0.7% or less;
// H200, bench/journal/2026-12-02.md, sparse MLA v3 step 3). Positions past `length` are invalid
// keys: their rows are zero-filled. (The small-head kernel gathers two tokens and has its own
// producer; there the immediate copies were 7% slower.)
template <int kQRows, uint32_t kQOffset, uint32_t kKOffset, int kNumKStages>
__device__ __forceinline__ void produce_tiles(const KernelArgs& p, uint32_t smem, uint64_t* full, uint64_t* empty,
                                              uint64_t* q_full, int64_t token, const uint8_t* q, int q_rows,
                                              int length, int num_tiles, int thread) {
  constexpr RowCopy kCopy = RowCopy::kImmediate;
  const int quarter = thread % kGatherThreadsPerRow;
  const int row_in_pass = thread / kGatherThreadsPerRow;
#pragma unroll
  for (int pass = 0; pass < (kQRows + kGatherRowsPerPass - 1) / kGatherRowsPerPass; ++pass) {
    const int row = pass * kGatherRowsPerPass + row_in_pass;
    const bool valid = row < q_rows;
    if (row < kQRows) gather_row<kQRows, kCopy>(smem + kQOffset, row, valid ? q + row * p.q_head_stride : q, valid, quarter);
  }
  hopper::cp_async_mbarrier_arrive_noinc(q_full);

  const int32_t* indices = token_indices(p, token);
  // Each tile from the indices in idx, loading the next tile's into next first (-1 past the token's
  // length: no load). The loop takes tiles in pairs so that the two index sets swap roles without a
  // copy (a copy waits for the load).
  const auto produce = [&](int tile, const int32_t (&idx)[kTilePasses], int32_t (&next)[kTilePasses]) {
    load_tile_indices(indices, tile + 1, length, row_in_pass, next);
    fill_ring_stage<kNumKStages, kCopy>(p, smem + kKOffset, full, empty, tile, idx, row_in_pass, quarter);
  };
  int32_t idx_even[kTilePasses], idx_odd[kTilePasses];
  load_tile_indices(indices, 0, length, row_in_pass, idx_even);
  for (int tile = 0; tile < num_tiles; tile += 2) {
    produce(tile, idx_even, idx_odd);
    if (tile + 1 < num_tiles) produce(tile + 1, idx_odd, idx_even);
  }
  // No copy may outlive the thread that issued it.
  hopper::cp_async_commit_group();
  hopper::cp_async_wait_group<0>();
}

}  // namespace fp8dsa::detail::sparse_mla
