// Where the V3.2-row kernel's P.V finds and puts its data (host and device; checked on the CPU by
// tests/sparse_mla/value_layout_test.cpp). It differs from value_layout.h in one point: the 64 M
// rows of one O^T accumulator block must lie in one 128-column scale block, because every row of
// a wgmma multiplies the same P_b. So of a thread's 8 d_v columns, blocks mb = 0, 1 hold 4
// consecutive columns of value group w's first scale block and mb = 2, 3 the same 4 columns of
// its second, 128 further:
//   column(mb, hh) = value_dv_v32(w, warp, lane) + 128 (mb / 2) + 2 (mb % 2) + hh.
// The V^T loads are then two 4-byte loads per key (the same key order and byte permutes as
// value_layout.h), conflict-free: a warp's 8 column groups of one key pair span 32 bytes of two
// swizzle chunks, and the 4 key pairs (t = lane % 4) land in the 4 distinct bank quarters.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "sparse_mla/v32_config.h"
#include "sparse_mla/value_layout.h"

namespace fp8dsa::detail::sparse_mla {

FP8DSA_HOST_DEVICE constexpr int value_dv_v32(int w, int warp, int lane) {
  return V32Config::kDvPerValueGroup * w + 32 * warp + 4 * (lane / 4);
}

// Distance in a nope tile between the two 4-byte loads of one key (128 columns = 2 atoms).
constexpr uint32_t kV32HighHalfBytes = 2 * V32Config::kKeysPerTile * 64;

// As value_loads (value_layout.h), for value_dv_v32: offset[x] is the first of the two loads.
FP8DSA_HOST_DEVICE ValueLoads value_loads_v32(int w, int thread) {
  const int warp = thread / 32, lane = thread % 32;
  const int t = lane % 4;
  constexpr int kAtomBytes = MlaShape::kKeysPerTile * 64;
  const int dv = value_dv_v32(w, warp, lane);
  const uint32_t atom = static_cast<uint32_t>(dv / 64) * kAtomBytes;
  // Columns dv .. dv + 3 of row k: chunk ((dv % 64) / 16) ^ ((k / 2) % 4), and (k / 2) % 4 = t.
  const uint32_t column = static_cast<uint32_t>(((((dv % 64) / 16) ^ t) << 4) + dv % 16);
  ValueLoads v{};
  for (int x = 0; x < 2; ++x) v.offset[x] = atom + static_cast<uint32_t>(2 * t + (x ^ (t % 2))) * 64 + column;
  v.sel_lo = t % 2 ? 0x1504u : 0x5140u;
  v.sel_hi = t % 2 ? 0x3726u : 0x7362u;
  return v;
}

// The P_b a value-group thread builds: row (head) thread / 2, K positions 32 (thread % 2) .. + 31,
// i.e. the two 16-byte chunks 2 (thread % 2) + {0, 1} of that row of a [64][64] K-major SW64 tile
// (P slot and P_b buffers alike). A warp's 16-byte accesses of one chunk index hit 8 distinct bank
// quarters per 8 threads.
FP8DSA_HOST_DEVICE constexpr int pb_row(int thread) { return thread / 2; }
FP8DSA_HOST_DEVICE constexpr int pb_first_position(int thread) { return 32 * (thread % 2); }
FP8DSA_HOST_DEVICE constexpr uint32_t pb_chunk_offset(int thread, int c) {
  const int row = pb_row(thread);
  const int chunk = 2 * (thread % 2) + c;
  return static_cast<uint32_t>(row * 64 + ((chunk ^ ((row / 2) % 4)) << 4));
}

}  // namespace fp8dsa::detail::sparse_mla
