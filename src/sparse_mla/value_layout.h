// Where the 64-head kernels' P.V finds and puts its data (host and device, so that the whole layout
// is checked on the CPU: tests/sparse_mla/value_layout_test.cpp): the seesaw kernel's math groups and
// the V3.2-row kernel's value groups (v32_value_layout.h), both "value groups" here; a small-head
// consumer (small_heads_kernel.cuh) holds all of d_v as both groups' blocks.
//
// O^T[d_v][heads] += V^T . P^T, V^T the register A operand, P^T [64 heads][64 keys] the shared B
// operand (K-major SW64, keys in the order of key_order.h). A value group w holds O^T for d_v
// [256w, 256w + 256) as 4 m64n64 accumulators (blocks mb). Both the d_v order inside a block and the
// key order along K are free, so each thread's fragments come from contiguous, conflict-free loads,
// in one of two forms:
//   - 8-byte loads (value_loads; the small-head consumers, and v32_value_layout.h's variant for the
//     V3.2 value groups): the two M rows (16 warp + lane/4 and + 8) a thread holds in each of the 4
//     blocks, 8 rows in all, are the 8 consecutive columns value_dv(w, warp, lane) + {2 mb + row
//     half}: one 8-byte load per key, all of a warp's inside one 64-byte atom; the epilogue undoes
//     the order. Thread t = lane % 4
//     needs keys 8c + 2t + {0, 1} (c = 0..7); a warp's 8-byte loads of one instruction hit 32
//     distinct banks when lanes with odd t load their two keys in the other order;
//   - ldmatrix.x4.trans (value_ldsm_offset, below; the seesaw's math groups): the same keys' order,
//     half the instructions, block mb's rows at value_dv_ldsm's columns.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "hopper/byte_perm.h"
#include "sparse_mla/config.h"

namespace fp8dsa::detail::sparse_mla {

// The d_v columns of one value group's O^T: half of d_v, 4 m64 blocks.
constexpr int kValueGroupDv = MlaShape::kDv / 2;

// The first of the 8 d_v columns thread (warp, lane) of value group w holds; block mb's row half hh
// is column value_dv(...) + 2 mb + hh.
FP8DSA_HOST_DEVICE constexpr int value_dv(int w, int warp, int lane) {
  return kValueGroupDv * w + 64 * warp + 8 * (lane / 4);
}

// The heads of a thread's accumulator registers (the N of m64n64): register 4c + 2hh + e is head
// 8c + 2 (lane % 4) + e (hopper::acc_col).
FP8DSA_HOST_DEVICE constexpr int value_head(int lane, int c, int e) { return 8 * c + 2 * (lane % 4) + e; }

// A thread's constants for its V^T loads: byte offsets within a K tile of its two loads for key
// group c = 0 (load x reads key 2t + (x ^ t % 2); group c adds 512 c) and the byte-permute selectors
// that put a loaded key pair back in key order.
struct ValueLoads {
  uint32_t offset[2];
  uint32_t sel_lo, sel_hi;
};

FP8DSA_HOST_DEVICE ValueLoads value_loads(int w, int thread) {
  const int warp = thread / 32, lane = thread % 32;
  const int r = lane / 4, t = lane % 4;
  constexpr int kAtomBytes = MlaShape::kKeysPerTile * 64;
  const uint32_t atom = static_cast<uint32_t>(value_dv(w, warp, lane) / 64) * kAtomBytes;
  // Column 8r of the atom in row k sits in 16-byte chunk (r / 2) ^ ((k / 2) % 4) = (r / 2) ^ t.
  const uint32_t column = static_cast<uint32_t>((((r / 2) ^ t) << 4) + 8 * (r % 2));
  ValueLoads v{};
  for (int x = 0; x < 2; ++x) v.offset[x] = atom + static_cast<uint32_t>(2 * t + (x ^ (t % 2))) * 64 + column;
  v.sel_lo = t % 2 ? 0x1504u : 0x5140u;  // bytes 0, 1 of the key pair interleaved: [A0 B0 A1 B1]
  v.sel_hi = t % 2 ? 0x3726u : 0x7362u;  // bytes 2, 3: [A2 B2 A3 B3]
  return v;
}

// The A fragments of k-step ks for the 4 blocks: frag[mb][j] holds V^T row (2 mb + j % 2) of the
// thread's 8 columns at K bytes 16 (j / 2) + 4t .. + 3 of the step, i.e. keys 8c + 2t + {0, 1} for
// c = 4 ks + 2 (j / 2) + {0, 1}, in that byte order (key_order.h). load8(offset, words) reads the 8
// bytes at that offset of the K tile.
template <class Load8>
FP8DSA_HOST_DEVICE void build_value_fragments(uint32_t (&frag)[4][4], const ValueLoads& v, int ks, Load8&& load8) {
#pragma unroll
  for (int jh = 0; jh < 2; ++jh) {
    uint32_t raw[2][2][2];  // [key group c - (4 ks + 2 jh)][load order][d_v bytes 0-3 / 4-7]
#pragma unroll
    for (int bc = 0; bc < 2; ++bc)
#pragma unroll
      for (int x = 0; x < 2; ++x) load8(v.offset[x] + static_cast<uint32_t>(4 * ks + 2 * jh + bc) * 512, raw[bc][x]);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // 4 keys A, B (group bc = 0) and C, D (bc = 1), 4 d_v bytes each -> 4 words [A_i B_i C_i D_i].
      const uint32_t t0 = hopper::byte_perm(raw[0][0][half], raw[0][1][half], v.sel_lo);
      const uint32_t t1 = hopper::byte_perm(raw[0][0][half], raw[0][1][half], v.sel_hi);
      const uint32_t t2 = hopper::byte_perm(raw[1][0][half], raw[1][1][half], v.sel_lo);
      const uint32_t t3 = hopper::byte_perm(raw[1][0][half], raw[1][1][half], v.sel_hi);
      const uint32_t words[4] = {hopper::byte_perm(t0, t2, 0x5410u), hopper::byte_perm(t0, t2, 0x7632u),
                                 hopper::byte_perm(t1, t3, 0x5410u), hopper::byte_perm(t1, t3, 0x7632u)};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int d = 4 * half + i;
        frag[d / 2][2 * jh + d % 2] = words[i];
      }
    }
  }
}

// The seesaw's V^T fragments from ldmatrix.x4.trans (value_gemm.cuh: load_value_fragments_ldsm),
// half the instructions of value_loads' 8-byte loads and permutes. In block mb, warp `warp` of value
// group w reads 16-byte chunk `warp` of 64-column atom 4 w + mb, lane l addressing key 32 ks + l of
// k-step ks; lane l = 4 r + q then receives 16-bit column r (d_v bytes 2 r, 2 r + 1 of the chunk) of
// keys 8 i + 2 q + {0, 1} in matrix i, and two byte permutes a matrix pair make M row r (d_v 2 r) and
// row r + 8 (d_v 2 r + 1) of keys {2q, 2q + 1, 8 + 2q, 9 + 2q} (+ 16 for the k-step's upper half):
// key_order.h's order. So block mb's row half hh is d_v column value_dv_ldsm(w, warp, lane, mb) + hh.
FP8DSA_HOST_DEVICE constexpr int value_dv_ldsm(int w, int warp, int lane, int mb) {
  return kValueGroupDv * w + 64 * mb + 16 * warp + 2 * (lane / 4);
}
// The thread's ldmatrix row address in a K tile for block mb of k-step ks: value_ldsm_offset(w,
// thread) + value_ldsm_step(mb, ks). Row (key) l's chunk c sits at 16 (c ^ (l / 2) % 4) of its row,
// block mb one SW64 atom of 64 rows further, k-step ks 32 rows.
FP8DSA_HOST_DEVICE constexpr uint32_t value_ldsm_offset(int w, int thread) {
  const int warp = thread / 32, lane = thread % 32;
  constexpr int kAtomBytes = MlaShape::kKeysPerTile * 64;
  return static_cast<uint32_t>(kValueGroupDv / 64 * w * kAtomBytes + lane * 64 + ((warp ^ ((lane / 2) % 4)) << 4));
}
FP8DSA_HOST_DEVICE constexpr uint32_t value_ldsm_step(int mb, int ks) {
  return static_cast<uint32_t>(mb * MlaShape::kKeysPerTile * 64 + ks * 32 * 64);
}
// Block mb's fragment from its ldmatrix.x4.trans words x: x[i] holds d_v bytes {2r, 2r + 1} of keys
// 8 i + 2q + {0, 1} (byte order: key-major); words 0 / 2 gather byte 2r of keys {2q, 2q + 1, 8 + 2q,
// 9 + 2q} (+ 16), words 1 / 3 byte 2r + 1.
FP8DSA_HOST_DEVICE void value_fragment_from_ldsm(uint32_t (&frag)[4], const uint32_t (&x)[4]) {
  frag[0] = hopper::byte_perm(x[0], x[1], 0x6420u);
  frag[1] = hopper::byte_perm(x[0], x[1], 0x7531u);
  frag[2] = hopper::byte_perm(x[2], x[3], 0x6420u);
  frag[3] = hopper::byte_perm(x[2], x[3], 0x7531u);
}

// A gather of 64-row tiles by 128 threads in two passes p (rows 32p + thread / 4), thread `thread`
// copying 16-byte chunk thread % 4 of each 64-byte atom it copies (the V3.2-row kernel's value
// groups): the chunk's shared offset in any tile is value_share_offset(thread) + 4096 atom + 2048 p,
// as the swizzle of row 32p + r (XOR of the chunk with (row / 2) % 4) depends neither on p nor on the
// atom.
FP8DSA_HOST_DEVICE constexpr uint32_t value_share_offset(int thread) {
  const int quarter = thread % 4, row_in_pass = thread / 4;
  return static_cast<uint32_t>(row_in_pass * 64 + ((quarter ^ ((row_in_pass / 2) % 4)) << 4));
}

// Byte offset in a P slot ([64 heads][64 keys] K-major SW64) of the score group's word pf[ks][j]
// (online_softmax.cuh: p_fragment) of thread (warp, lane): row 16 warp + lane / 4 + 8 (j % 2), K
// bytes 32 ks + 16 (j / 2) + 4 (lane % 4) .. + 3, swizzled with (row / 2) % 4 = lane / 8. A warp's
// 32 stores of one word hit 32 banks.
FP8DSA_HOST_DEVICE constexpr uint32_t p_slot_offset(int warp, int lane, int ks, int j) {
  const int row = 16 * warp + lane / 4;
  const int chunk = 2 * ks + j / 2;
  return static_cast<uint32_t>(row * 64 + ((chunk ^ (lane / 8)) << 4) + 4 * (lane % 4) + 512 * (j % 2));
}

}  // namespace fp8dsa::detail::sparse_mla
