#include <gtest/gtest.h>

#include <set>

#include "hopper/smem_descriptor.h"
#include "hopper/swizzle.h"

namespace fp8dsa::hopper {
namespace {

TEST(Swizzle, RowZeroIsIdentity) {
  for (Swizzle s : {Swizzle::k128B, Swizzle::k64B, Swizzle::k32B}) {
    for (uint32_t k = 0; k < swizzle_width_bytes(s); ++k) EXPECT_EQ(kmajor_offset(s, 64, 0, k), k);
  }
}

TEST(Swizzle, Hand128B) {
  // Row 1 of a 128B-swizzled tile: chunk c goes to chunk c ^ 1.
  EXPECT_EQ(kmajor_offset(Swizzle::k128B, 64, 1, 0), 128u + 16u);
  EXPECT_EQ(kmajor_offset(Swizzle::k128B, 64, 1, 16), 128u + 0u);
  // Row 7, byte 5 of chunk 2: chunk 2 ^ 7 = 5.
  EXPECT_EQ(kmajor_offset(Swizzle::k128B, 64, 7, 37), 7u * 128u + 5u * 16u + 5u);
  // Row 8 starts the next 1024-byte atom, unswizzled again.
  EXPECT_EQ(kmajor_offset(Swizzle::k128B, 64, 8, 3), 1024u + 3u);
  // Byte 128 of K starts the second column block, 64 rows x 128 bytes further.
  EXPECT_EQ(kmajor_offset(Swizzle::k128B, 64, 0, 128), 64u * 128u);
}

TEST(Swizzle, Hand64B) {
  // 64-byte rows: rows 0-1 share XOR value 0, rows 2-3 XOR 1, rows 4-5 XOR 2, rows 6-7 XOR 3.
  EXPECT_EQ(kmajor_offset(Swizzle::k64B, 64, 1, 0), 64u);
  EXPECT_EQ(kmajor_offset(Swizzle::k64B, 64, 2, 0), 128u + 16u);
  EXPECT_EQ(kmajor_offset(Swizzle::k64B, 64, 6, 48 + 1), 6u * 64u + (3u ^ 3u) * 16u + 1u);
  EXPECT_EQ(kmajor_offset(Swizzle::k64B, 64, 8, 0), 512u);
  EXPECT_EQ(kmajor_offset(Swizzle::k64B, 64, 3, 64), 64u * 64u + 3u * 64u + 16u);
}

TEST(Swizzle, IsAPermutationOfTheTile) {
  for (Swizzle s : {Swizzle::k128B, Swizzle::k64B, Swizzle::k32B}) {
    const uint32_t rows = 64, k = 576 - 576 % swizzle_width_bytes(s);
    std::set<uint32_t> seen;
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < k; ++c) seen.insert(kmajor_offset(s, rows, r, c));
    EXPECT_EQ(seen.size(), rows * k);
    EXPECT_EQ(*seen.rbegin(), rows * k - 1);
  }
}

TEST(SmemDescriptor, FieldsEncode) {
  const uint64_t d = make_smem_descriptor(0x1400, Swizzle::k128B, 16, 1024);
  EXPECT_EQ(d & 0x3FFF, 0x1400u >> 4);
  EXPECT_EQ((d >> 16) & 0x3FFF, 1u);
  EXPECT_EQ((d >> 32) & 0x3FFF, 1024u >> 4);
  EXPECT_EQ((d >> 49) & 0x7, 0u);
  EXPECT_EQ(d >> 62, 1u);
  EXPECT_EQ(make_smem_descriptor(0, Swizzle::k64B, 16, 512) >> 62, 2u);
}

TEST(SmemDescriptor, KmajorStepsWithinAndAcrossAtoms) {
  const uint32_t base = 0x8000;
  // 128B: k steps of 32 bytes inside the atom advance the start address by 32 bytes.
  EXPECT_EQ(kmajor_descriptor(base, Swizzle::k128B, 64, 96) & 0x3FFF, (base + 96) >> 4);
  // Crossing into the second column block jumps by rows * 128 bytes.
  EXPECT_EQ(kmajor_descriptor(base, Swizzle::k128B, 64, 160) & 0x3FFF, (base + 64 * 128 + 32) >> 4);
  // 64B swizzle with 64 rows: column blocks are 4096 bytes apart; SBO = 512.
  const uint64_t d = kmajor_descriptor(base, Swizzle::k64B, 64, 544);
  EXPECT_EQ(d & 0x3FFF, (base + 8 * 4096 + 32) >> 4);
  EXPECT_EQ((d >> 32) & 0x3FFF, 512u >> 4);
  EXPECT_EQ(advance_descriptor(d, 64) - d, 4u);
}

}  // namespace
}  // namespace fp8dsa::hopper
