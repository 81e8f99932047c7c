// The 64-head kernels' P.V data path (value_layout.h), emulated on the CPU thread by thread: the
// scoring threads' P words into a P slot, each value-group thread's V^T fragments from a gathered K
// tile, the wgmma O^T += V^T P^T on those fragments (operand layouts of hopper/wgmma_layout.h) and
// the epilogue's (head, d_v) for every accumulator register, against O = P V computed directly.
// Also: the fragments' 8-byte loads of one instruction hit 32 distinct banks (half-warp phases).
// The same for the V3.2-row kernel's layout (v32_value_layout.h): two 4-byte loads per key, and
// every accumulator block's 64 rows inside one 128-column scale block.
// And the small-head kernel's use of it: both value groups' blocks in one consumer, its own P^T.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "hopper/swizzle.h"
#include "hopper/wgmma_layout.h"
#include "sparse_mla/config.h"
#include "sparse_mla/key_order.h"
#include "sparse_mla/v32_value_layout.h"
#include "sparse_mla/value_layout.h"

namespace fp8dsa::detail::sparse_mla {
namespace {

// The seesaw kernel's math groups are the value groups of value_layout.h (seesaw_kernel.cuh asserts
// that their d_v halves agree).
using C = SeesawConfig;
constexpr int kKeys = C::kKeysPerTile, kHeads = C::kHeads;

// Small integers as bytes: the emulated MMA multiplies them exactly.
std::vector<int> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> v(n);
  for (int& x : v) x = static_cast<int>(rng() % 251);
  return v;
}

// A gathered tile of `cols` columns (K-major SW64): V[key][d] = v_values[key * cols + d] at row key,
// column d.
std::vector<uint8_t> gathered_tile(size_t bytes, const std::vector<int>& v_values, int cols) {
  std::vector<uint8_t> tile(bytes);
  for (int key = 0; key < kKeys; ++key)
    for (int col = 0; col < cols; ++col)
      tile[hopper::kmajor_offset(hopper::Swizzle::k64B, kKeys, key, col)] =
          static_cast<uint8_t>(v_values[key * cols + col]);
  return tile;
}

// The value fragments' 8-byte shared load (value_gemm.cuh: lds64) from `tile`.
auto tile_load8(const std::vector<uint8_t>& tile) {
  return [&tile](uint32_t offset, uint32_t (&words)[2]) {
    EXPECT_EQ(offset % 8, 0u);
    for (int i = 0; i < 2; ++i) {
      words[i] = 0;
      for (int b = 0; b < 4; ++b) words[i] |= static_cast<uint32_t>(tile[offset + 4 * i + b]) << (8 * b);
    }
  };
}

// O^T = V^T P^T as the wgmma computes it from each value-group thread's fragments (built by
// `loads` through load8, as the kernel does) and P^T(n, k): D[mb][m][n], over the tile's 64 keys.
// frags(thread, ks, frag) builds a thread's fragments of k-step ks.
template <class Frags, class PT>
std::vector<int64_t> emulate_value_mma_from(Frags&& frags, PT&& p_t) {
  std::vector<int64_t> o(static_cast<size_t>(4) * 64 * 64, 0);
  for (int ks = 0; ks < 2; ++ks) {
    std::vector<int> a(static_cast<size_t>(4) * 64 * 32, -1);
    for (int thread = 0; thread < 128; ++thread) {
      const int warp = thread / 32, lane = thread % 32;
      uint32_t frag[4][4];
      frags(thread, ks, frag);
      for (int mb = 0; mb < 4; ++mb)
        for (int j = 0; j < 4; ++j)
          for (int b = 0; b < 4; ++b) {
            int& cell = a[(mb * 64 + hopper::a_frag_row(warp, lane, j)) * 32 + hopper::a_frag_k(lane, j) + b];
            EXPECT_EQ(cell, -1) << "fragment element written twice";
            cell = static_cast<int>((frag[mb][j] >> (8 * b)) & 0xFF);
          }
    }
    for (int mb = 0; mb < 4; ++mb)
      for (int m = 0; m < 64; ++m)
        for (int n = 0; n < kHeads; ++n) {
          int64_t sum = 0;
          for (int k = 0; k < 32; ++k) sum += int64_t{a[(mb * 64 + m) * 32 + k]} * p_t(n, 32 * ks + k);
          o[(mb * 64 + m) * 64 + n] += sum;
        }
  }
  return o;
}

template <class Loads, class Load8, class PT>
std::vector<int64_t> emulate_value_mma(Loads&& loads, Load8&& load8, PT&& p_t) {
  return emulate_value_mma_from(
      [&](int thread, int ks, uint32_t (&frag)[4][4]) { build_value_fragments(frag, loads(thread), ks, load8); }, p_t);
}

// ldmatrix.sync.aligned.m8n8.x4.trans.b16 of one warp, lane l addressing row l % 8 of matrix l / 8
// at rows[l]: lane l receives in x[i] the 16-bit column l / 4 of matrix i's rows 2 (l % 4) (low half)
// and 2 (l % 4) + 1.
void emulate_ldsm_x4_trans(const std::vector<uint8_t>& tile, const uint32_t (&rows)[32], uint32_t (&x)[32][4]) {
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      x[lane][i] = 0;
      for (int h = 0; h < 2; ++h) {
        const uint32_t at = rows[8 * i + 2 * (lane % 4) + h] + 2 * (lane / 4);
        EXPECT_EQ(rows[8 * i + 2 * (lane % 4) + h] % 16, 0u) << "ldmatrix rows are 16-byte aligned";
        x[lane][i] |= (static_cast<uint32_t>(tile[at]) | static_cast<uint32_t>(tile[at + 1]) << 8) << (16 * h);
      }
    }
}

// The epilogue's reading of O^T (from emulate_value_mma) for value group w: register 4c + 2hh + e of
// block mb is head value_head(lane, c, e) and column dv_of(warp, lane, mb, hh), and holds
// sum_key P[head][key] V[key][dv] (V rows of v_row elements); every (head, column) of the group's
// columns once. `heads` is the accumulator's N (64; 16 or 8 for the small-head kernel).
template <class DvOf>
void expect_epilogue_reads_p_times_v(const std::vector<int64_t>& o, int w, DvOf&& dv_of,
                                     const std::vector<int>& p_values, const std::vector<int>& v_values, int v_row,
                                     int dv_per_group, int heads = kHeads) {
  std::set<std::pair<int, int>> seen;
  for (int thread = 0; thread < 128; ++thread) {
    const int warp = thread / 32, lane = thread % 32;
    for (int mb = 0; mb < 4; ++mb)
      for (int c = 0; c < heads / 8; ++c)
        for (int hh = 0; hh < 2; ++hh)
          for (int e = 0; e < 2; ++e) {
            const int r = 4 * c + 2 * hh + e;
            const int head = value_head(lane, c, e);
            const int dv = dv_of(warp, lane, mb, hh);
            ASSERT_EQ(head, hopper::acc_col(lane, r));
            ASSERT_TRUE(seen.insert({head, dv}).second) << "output cell written twice";
            int64_t expected = 0;
            for (int key = 0; key < kKeys; ++key) {
              expected += int64_t{p_values[head * kKeys + key]} * v_values[key * v_row + dv];
            }
            ASSERT_EQ(o[(mb * 64 + hopper::acc_row(warp, lane, r)) * 64 + head], expected)
                << "w=" << w << " thread=" << thread << " head=" << head << " dv=" << dv;
          }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(heads) * dv_per_group);
}

TEST(SparseMlaValueLayout, FragmentsMmaAndEpilogueComputePTimesV) {
  const std::vector<int> v_values = random_bytes(static_cast<size_t>(kKeys) * C::kDqk, 7);
  const std::vector<uint8_t> tile = gathered_tile(C::kKTileBytes, v_values, C::kDqk);
  // P[head][key], placed in the score group's accumulator registers, packed into words by the
  // fragment rule and stored at p_slot_offset.
  const std::vector<int> p_values = random_bytes(static_cast<size_t>(kHeads) * kKeys, 11);
  std::vector<uint8_t> slot(C::kPSlotBytes, 0);
  for (int warp = 0; warp < 4; ++warp)
    for (int lane = 0; lane < 32; ++lane) {
      uint8_t acc[32];
      for (int r = 0; r < 32; ++r)
        acc[r] = static_cast<uint8_t>(p_values[hopper::acc_row(warp, lane, r) * kKeys + hopper::acc_col(lane, r)]);
      for (int ks = 0; ks < 2; ++ks)
        for (int j = 0; j < 4; ++j) {
          uint32_t word = 0;
          for (int b = 0; b < 4; ++b) word |= static_cast<uint32_t>(acc[p_fragment_register(ks, j, b)]) << (8 * b);
          const uint32_t at = p_slot_offset(warp, lane, ks, j);
          for (int b = 0; b < 4; ++b) slot[at + b] = static_cast<uint8_t>(word >> (8 * b));
        }
    }
  // The B operand as wgmma reads it: row n (head), K byte k of the slot.
  const auto p_t = [&](int n, int k) {
    return static_cast<int>(slot[hopper::kmajor_offset(hopper::Swizzle::k64B, kHeads, n, k)]);
  };
  for (int n = 0; n < kHeads; ++n)
    for (int k = 0; k < kKeys; ++k) ASSERT_EQ(p_t(n, k), p_values[n * kKeys + v_key_at(k)]) << n << " " << k;

  for (int w = 0; w < C::kNumMathGroups; ++w) {
    // Each thread's fragments, A[mb][m][k] of each k-step as the wgmma sees them, times P^T.
    const std::vector<int64_t> o =
        emulate_value_mma([&](int thread) { return value_loads(w, thread); }, tile_load8(tile), p_t);
    expect_epilogue_reads_p_times_v(
        o, w, [&](int warp, int lane, int mb, int hh) { return value_dv(w, warp, lane) + 2 * mb + hh; }, p_values,
        v_values, C::kDqk, kValueGroupDv);
  }
}

// The seesaw kernel's ldmatrix fragments (value_gemm.cuh: load_value_fragments_ldsm): the same
// data path with V^T from ldmatrix.x4.trans and value_fragment_from_ldsm, its epilogue taking row
// half hh of block mb as d_v column value_dv_ldsm(w, warp, lane, mb) + hh.
TEST(SparseMlaValueLayout, LdsmFragmentsMmaAndEpilogueComputePTimesV) {
  const std::vector<int> v_values = random_bytes(static_cast<size_t>(kKeys) * C::kDqk, 13);
  const std::vector<uint8_t> tile = gathered_tile(C::kKTileBytes, v_values, C::kDqk);
  const std::vector<int> p_values = random_bytes(static_cast<size_t>(kHeads) * kKeys, 17);
  std::vector<uint8_t> pt(C::kPSlotBytes, 0);
  for (int head = 0; head < kHeads; ++head)
    for (int key = 0; key < kKeys; ++key)
      pt[hopper::kmajor_offset(hopper::Swizzle::k64B, kHeads, head, v_pos_of_key(key))] =
          static_cast<uint8_t>(p_values[head * kKeys + key]);
  const auto p_t = [&](int n, int k) {
    return static_cast<int>(pt[hopper::kmajor_offset(hopper::Swizzle::k64B, kHeads, n, k)]);
  };
  std::set<int> columns;
  for (int w = 0; w < C::kNumMathGroups; ++w) {
    const auto frags = [&](int thread, int ks, uint32_t (&frag)[4][4]) {
      const int warp = thread / 32, lane = thread % 32;
      for (int mb = 0; mb < 4; ++mb) {
        uint32_t rows[32], x[32][4];
        for (int l = 0; l < 32; ++l) rows[l] = value_ldsm_offset(w, 32 * warp + l) + value_ldsm_step(mb, ks);
        emulate_ldsm_x4_trans(tile, rows, x);
        value_fragment_from_ldsm(frag[mb], x[lane]);
      }
    };
    const std::vector<int64_t> o = emulate_value_mma_from(frags, p_t);
    const auto dv_of = [&](int warp, int lane, int mb, int hh) { return value_dv_ldsm(w, warp, lane, mb) + hh; };
    expect_epilogue_reads_p_times_v(o, w, dv_of, p_values, v_values, C::kDqk, kValueGroupDv);
    for (int thread = 0; thread < 128; ++thread)
      for (int mb = 0; mb < 4; ++mb)
        for (int hh = 0; hh < 2; ++hh) columns.insert(dv_of(thread / 32, thread % 32, mb, hh));
  }
  EXPECT_EQ(columns.size(), static_cast<size_t>(C::kDv)) << "the two groups' columns are all of d_v";
}

// An ldmatrix phase reads one 8 x 16-byte matrix; it is conflict-free when its 8 rows sit in 8
// distinct 16-byte bank groups.
TEST(SparseMlaValueLayout, LdsmFragmentLoadsAreConflictFree) {
  for (int w = 0; w < C::kNumMathGroups; ++w)
    for (int warp = 0; warp < 4; ++warp)
      for (int mb = 0; mb < 4; ++mb)
        for (int ks = 0; ks < 2; ++ks)
          for (int i = 0; i < 4; ++i) {
            std::set<uint32_t> groups;
            for (int row = 0; row < 8; ++row)
              groups.insert((value_ldsm_offset(w, 32 * warp + 8 * i + row) + value_ldsm_step(mb, ks)) % 128 / 16);
            EXPECT_EQ(groups.size(), 8u) << "w=" << w << " warp=" << warp << " mb=" << mb << " ks=" << ks;
          }
}

// The small-head kernel (small_heads_kernel.cuh): one consumer holds both value groups' blocks
// (O^T block 4w + mb) and writes P^T itself, byte P[head][key] at K position v_pos_of_key(key) of
// an [h][64] K-major SW64 tile; its epilogue takes row half hh of block 4w + mb as d_v column
// value_dv(w, warp, lane) + 2 mb + hh. Every (head, d_v) of the h x 512 once, equal to P V.
template <int kH>
void expect_small_heads_value_path_computes_p_times_v() {
  SCOPED_TRACE("h=" + std::to_string(kH));
  const std::vector<int> v_values = random_bytes(static_cast<size_t>(kKeys) * C::kDqk, 23);
  const std::vector<uint8_t> tile = gathered_tile(C::kKTileBytes, v_values, C::kDqk);
  const std::vector<int> p_values = random_bytes(static_cast<size_t>(kH) * kKeys, 29);
  std::vector<uint8_t> pt(SmallHeadsConfig<kH>::kPtBytes, 0);
  for (int head = 0; head < kH; ++head)
    for (int key = 0; key < kKeys; ++key)
      pt[hopper::kmajor_offset(hopper::Swizzle::k64B, kH, head, v_pos_of_key(key))] =
          static_cast<uint8_t>(p_values[head * kKeys + key]);
  const auto p_t = [&](int n, int k) {
    return n < kH ? static_cast<int>(pt[hopper::kmajor_offset(hopper::Swizzle::k64B, kH, n, k)]) : 0;
  };
  std::set<std::pair<int, int>> cells;
  for (int w = 0; w < 2; ++w) {
    const std::vector<int64_t> o =
        emulate_value_mma([&](int thread) { return value_loads(w, thread); }, tile_load8(tile), p_t);
    const auto dv_of = [&](int warp, int lane, int mb, int hh) { return value_dv(w, warp, lane) + 2 * mb + hh; };
    expect_epilogue_reads_p_times_v(o, w, dv_of, p_values, v_values, C::kDqk, kValueGroupDv, kH);
    for (int thread = 0; thread < 128; ++thread)
      for (int mb = 0; mb < 4; ++mb)
        for (int r = 0; r < SmallHeadsConfig<kH>::kAccRegs; ++r) {
          const int warp = thread / 32, lane = thread % 32;
          // The kernel's expression, with b = 4w + mb.
          const int b = 4 * w + mb;
          const int dv = value_dv(b / 4, warp, lane) + 2 * (b % 4) + (r / 2) % 2;
          ASSERT_EQ(dv, dv_of(warp, lane, mb, (r / 2) % 2));
          cells.insert({hopper::acc_col(lane, r), dv});
        }
  }
  EXPECT_EQ(cells.size(), static_cast<size_t>(kH) * C::kDv);
}

TEST(SparseMlaValueLayout, SmallHeadsFragmentsMmaAndEpilogueComputePTimesV) {
  expect_small_heads_value_path_computes_p_times_v<16>();
  expect_small_heads_value_path_computes_p_times_v<8>();
}

// Shared memory serves a warp's 8-byte loads in two half-warp phases; a phase is conflict-free when
// its 16 lanes read 16 distinct 8-byte bank pairs.
TEST(SparseMlaValueLayout, FragmentLoadsAreConflictFree) {
  for (int w = 0; w < C::kNumMathGroups; ++w)
    for (int warp = 0; warp < 4; ++warp)
      for (int ks = 0; ks < 2; ++ks) {
        std::vector<std::vector<uint32_t>> offsets(32);  // per lane, in load order
        for (int lane = 0; lane < 32; ++lane) {
          uint32_t frag[4][4];
          build_value_fragments(frag, value_loads(w, 32 * warp + lane), ks,
                                [&](uint32_t offset, uint32_t (&words)[2]) {
                                  offsets[lane].push_back(offset);
                                  words[0] = words[1] = 0;
                                });
        }
        for (size_t i = 0; i < offsets[0].size(); ++i)
          for (int phase = 0; phase < 2; ++phase) {
            std::set<uint32_t> banks;
            for (int lane = 16 * phase; lane < 16 * phase + 16; ++lane) banks.insert((offsets[lane][i] % 128) / 8);
            EXPECT_EQ(banks.size(), 16u) << "w=" << w << " warp=" << warp << " ks=" << ks << " load " << i;
          }
      }
}

// value_share_offset (the V3.2-row kernel's gather): the offset plus an atom's and a pass's constant
// is where the SW64 K-major layout puts each thread's chunk, and the 128 threads' chunks of a pass
// cover its 32 rows of an atom once.
TEST(SparseMlaValueLayout, ShareOffsetIsTheSwizzledChunk) {
  constexpr int kAtoms = C::kDqk / 64;
  std::vector<int> copies(C::kKTileBytes / 16, 0);
  for (int thread = 0; thread < 128; ++thread)
    for (int pass = 0; pass < 2; ++pass)
      for (int atom = 0; atom < kAtoms; ++atom) {
        const int row = 32 * pass + thread / 4, col = 64 * atom + 16 * (thread % 4);
        const uint32_t dst = value_share_offset(thread) + static_cast<uint32_t>(atom) * 4096 + 2048u * pass;
        ASSERT_EQ(dst, hopper::kmajor_offset(hopper::Swizzle::k64B, kKeys, row, col)) << thread;
        ++copies[dst / 16];
      }
  for (size_t i = 0; i < copies.size(); ++i) EXPECT_EQ(copies[i], 1) << "chunk " << i;
}

// V3.2 rows: V^T fragments from a nope tile (the first 512 columns of the 576-column tile above
// serve: the nope tile is the same SW64 layout), O^T = V^T P^T, and the epilogue's columns.
TEST(SparseMlaValueLayout, V32FragmentsMmaAndEpilogueComputePTimesV) {
  const std::vector<int> v_values = random_bytes(static_cast<size_t>(kKeys) * C::kDv, 17);
  const std::vector<uint8_t> tile = gathered_tile(V32Config::kNopeTileBytes, v_values, C::kDv);
  // P^T as the wgmma reads it: K position k of head n holds key v_key_at(k).
  const std::vector<int> p_values = random_bytes(static_cast<size_t>(kHeads) * kKeys, 19);
  const auto p_t = [&](int n, int k) { return p_values[n * kKeys + v_key_at(k)]; };
  for (int w = 0; w < V32Config::kNumValueGroups; ++w) {
    const std::vector<int64_t> o = emulate_value_mma(
        [&](int thread) { return value_loads_v32(w, thread); },
        [&](uint32_t offset, uint32_t (&words)[2]) {
          EXPECT_EQ(offset % 4, 0u);
          for (int i = 0; i < 2; ++i) {
            const uint32_t at = offset + static_cast<uint32_t>(i) * kV32HighHalfBytes;
            words[i] = 0;
            for (int b = 0; b < 4; ++b) words[i] |= static_cast<uint32_t>(tile[at + b]) << (8 * b);
          }
        },
        p_t);
    expect_epilogue_reads_p_times_v(
        o, w,
        [&](int warp, int lane, int mb, int hh) {
          const int dv = value_dv_v32(w, warp, lane) + kV32ScaleBlock * (mb / 2) + 2 * (mb % 2) + hh;
          EXPECT_EQ(dv / kV32ScaleBlock, 2 * w + mb / 2) << "a block's rows share one scale block";
          return dv;
        },
        p_values, v_values, C::kDv, V32Config::kDvPerValueGroup);
  }
}

// A warp's 4-byte loads of one instruction hit 32 distinct banks.
TEST(SparseMlaValueLayout, V32FragmentLoadsAreConflictFree) {
  for (int w = 0; w < V32Config::kNumValueGroups; ++w)
    for (int warp = 0; warp < 4; ++warp)
      for (int ks = 0; ks < 2; ++ks) {
        std::vector<std::vector<uint32_t>> offsets(32);
        for (int lane = 0; lane < 32; ++lane) {
          uint32_t frag[4][4];
          build_value_fragments(frag, value_loads_v32(w, 32 * warp + lane), ks,
                                [&](uint32_t offset, uint32_t (&words)[2]) {
                                  offsets[lane].push_back(offset);
                                  offsets[lane].push_back(offset + kV32HighHalfBytes);
                                  words[0] = words[1] = 0;
                                });
        }
        for (size_t i = 0; i < offsets[0].size(); ++i) {
          std::set<uint32_t> banks;
          for (int lane = 0; lane < 32; ++lane) banks.insert((offsets[lane][i] % 128) / 4);
          EXPECT_EQ(banks.size(), 32u) << "w=" << w << " warp=" << warp << " ks=" << ks << " load " << i;
        }
      }
}

// The P_b chunks of a group's 128 threads cover a [64][64] tile once, in SW64 order.
TEST(SparseMlaValueLayout, V32PbChunksCoverTheTileOnce) {
  std::vector<int> copies(V32Config::kPSlotBytes / 16, 0);
  for (int thread = 0; thread < 128; ++thread)
    for (int c = 0; c < 2; ++c) {
      const uint32_t at = pb_chunk_offset(thread, c);
      ASSERT_EQ(at, hopper::kmajor_offset(hopper::Swizzle::k64B, kHeads, pb_row(thread),
                                          static_cast<uint32_t>(pb_first_position(thread) + 16 * c)));
      ++copies[at / 16];
    }
  for (size_t i = 0; i < copies.size(); ++i) EXPECT_EQ(copies[i], 1) << "chunk " << i;
}

}  // namespace
}  // namespace fp8dsa::detail::sparse_mla
