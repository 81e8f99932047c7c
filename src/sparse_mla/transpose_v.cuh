// V^T for the small-head kernel's P.V: the transposed copy of a gathered tile's first 512 columns,
// [d_v][64 keys] K-major with 64B swizzle, keys in the order of key_order.h, written from the
// K-major KV tile by one consumer warpgroup. (The 64-head kernel builds V^T in registers instead:
// value_gemm.cuh.)
#pragma once

#include <cstdint>

#include "hopper/byte_perm.h"
#include "hopper/smem_access.cuh"
#include "hopper/swizzle.h"
#include "sparse_mla/config.h"
#include "sparse_mla/key_order.h"

namespace fp8dsa::detail::sparse_mla {

#if defined(__CUDACC__)

// Transposes the tile at k_tile (K-major [64 keys][576], SW64) into vt (K-major [512][64 keys],
// SW64, keys permuted by v_key_at). Called by all 128 threads of one warpgroup (thread = 0..127).
//
// Each thread moves 4 blocks of 4 keys x 16 columns, one per round: loads rows {2t, 2t+1, 2t+8,
// 2t+9} of a 16-key group g (16 bytes each), transposes 4x4 bytes with prmt, stores one 32-bit
// word (four keys) per column. Lane bit 2 (b) flips the row and store order so that both the
// 16-byte loads and the 4-byte stores of a warp hit 32 distinct banks; the prmt selectors undo the
// flip.
constexpr int kTransposeRounds = 4;
__device__ __forceinline__ void transpose_v(uint32_t k_tile, uint32_t vt, int thread) {
  const int lane = thread % 32, warp = thread / 32;
  const int t = lane % 4;
  const int b = (lane / 4) % 2;
  const int g = lane / 8;  // 16-key group
  // First-stage selectors interleave bytes of two rows; with b the rows arrive swapped.
  const uint32_t sel_lo = b ? 0x1504u : 0x5140u;
  const uint32_t sel_hi = b ? 0x3726u : 0x7362u;
  // Second stage: word i holds byte i of all four rows; with b, words come out pair-swapped so that
  // the store order (d parity) alternates between the two lane halves.
  const uint32_t sel_even = b ? 0x7632u : 0x5410u;
  const uint32_t sel_odd = b ? 0x5410u : 0x7632u;
  const int row0 = 16 * g + 2 * t + b;  // rows in load order: row0, row0 ^ 1, row0 + 8, row0 ^ 1 + 8
  // Addresses (kmajor_offset, worked out so each access is a base register plus an immediate).
  // Load of row r, 16-byte chunk dc: (dc/4)*4096 + r*64 + ((dc%4) ^ (r/2)%4)*16, where (r/2)%4 = t
  // for all four rows, dc/4 = 2*warp + it/2 and dc%4 = 2*(it%2) + b.
  // The base has address bits 4-5 zero, so adding the chunk (b ^ t) << 4 and flipping bit 5 for
  // odd rounds ((2 + b) ^ t = (b ^ t) ^ 2) is exact. rows_a: rows row0 and row0 + 8; rows_b: row0 ^ 1
  // and row0 ^ 1 + 8 (64 bytes further or back).
  const uint32_t rows_a = k_tile + 2 * warp * 4096 + row0 * 64 + static_cast<uint32_t>((b ^ t) << 4);
  const uint32_t rows_b = rows_a + (1 - 2 * b) * 64;
  // Store of column d = dc*16 + 4m + (i^b) at keys 16g + 4t: d*64 + (g ^ (d/2)%4)*16 + 4t, where
  // (d/2)%4 = (2m + i/2)%4 and (i^b)*64 = i*64 + (i odd ? -64 : +64)*b.
  // The other terms leave address bits 4-5 zero (vt is 1024-aligned, 4t < 16, the rest are
  // multiples of 64), so the chunk (g ^ c) << 4 is an XOR of c << 4 into one base per parity: two
  // registers instead of eight, which leaves room for two rounds of loads in flight.
  uint32_t store_base[2];
#pragma unroll
  for (int parity = 0; parity < 2; ++parity)
    store_base[parity] = vt + (warp * 8 + b) * 1024 + 4 * t + (parity ? -64 * b : 64 * b) + (g << 4);
  // Round it: loads of its four 16-byte row pieces, then the transposed 4-byte stores.
  const auto load_round = [&](uint32_t (&r)[4][4], int it) {
    const uint32_t flip = static_cast<uint32_t>((it % 2) << 5), step = (it / 2) * 4096;
    const uint32_t load_a = (rows_a ^ flip) + step, load_b = (rows_b ^ flip) + step;
    hopper::lds128(r[0], load_a);
    hopper::lds128(r[1], load_b);
    hopper::lds128(r[2], load_a + 512);
    hopper::lds128(r[3], load_b + 512);
  };
  const auto store_round = [&](const uint32_t (&r)[4][4], int it) {
    const uint32_t round_offset = it * 2048;  // dc grows by 2 per round
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t t0 = hopper::byte_perm(r[0][m], r[1][m], sel_lo);
      const uint32_t t1 = hopper::byte_perm(r[2][m], r[3][m], sel_lo);
      const uint32_t t2 = hopper::byte_perm(r[0][m], r[1][m], sel_hi);
      const uint32_t t3 = hopper::byte_perm(r[2][m], r[3][m], sel_hi);
      const uint32_t w[4] = {hopper::byte_perm(t0, t1, sel_even), hopper::byte_perm(t0, t1, sel_odd),
                             hopper::byte_perm(t2, t3, sel_even), hopper::byte_perm(t2, t3, sel_odd)};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t chunk = static_cast<uint32_t>(((2 * m + i / 2) % 4) << 4);
        hopper::sts32((store_base[i % 2] ^ chunk) + round_offset + (4 * m + i) * 64, w[i]);
      }
    }
  };
  // Software-pipelined: the next round's loads are in flight while this round's bytes are permuted
  // and stored (the permutes otherwise wait on the loads: a profile showed them as a fifth of the
  // consumers' stall samples).
  uint32_t r[2][4][4];
  load_round(r[0], 0);
#pragma unroll
  for (int it = 0; it < kTransposeRounds; ++it) {
    if (it + 1 < kTransposeRounds) load_round(r[(it + 1) % 2], it + 1);
    store_round(r[it % 2], it);
  }
}

#endif  // __CUDACC__

}  // namespace fp8dsa::detail::sparse_mla
