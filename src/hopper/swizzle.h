// Shared-memory swizzle arithmetic (host and device): where element (row, byte column) of a
// K-major tile lives when the tile is stored with TMA's / wgmma's 128B, 64B or 32B swizzle.
//
// The hardware XORs address bits [4, 4 + b) (the 16-byte chunk) with bits [7, 7 + b), where
// b = 3, 2, 1 for 128B, 64B, 32B. A K-major tile of `rows` rows and K bytes is stored as K / W
// column blocks of rows x W bytes (W = the swizzle width), each block rows * W bytes long.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace fp8dsa::hopper {

// Values are the wgmma descriptor's "layout type" field (bits 62-63).
enum class Swizzle : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

FP8DSA_HOST_DEVICE constexpr uint32_t swizzle_width_bytes(Swizzle s) {
  return s == Swizzle::k128B ? 128u : s == Swizzle::k64B ? 64u : s == Swizzle::k32B ? 32u : 16u;
}

// Number of XOR'd bits (b above).
FP8DSA_HOST_DEVICE constexpr uint32_t swizzle_bits(Swizzle s) {
  return s == Swizzle::k128B ? 3u : s == Swizzle::k64B ? 2u : s == Swizzle::k32B ? 1u : 0u;
}

// Byte offset after swizzling, for an offset measured from a 1024-byte-aligned tile base.
FP8DSA_HOST_DEVICE constexpr uint32_t swizzle_offset(Swizzle s, uint32_t offset) {
  const uint32_t mask = (1u << swizzle_bits(s)) - 1u;
  return offset ^ (((offset >> 7) & mask) << 4);
}

// Byte offset of (row, k_byte) in a K-major tile of `rows` rows stored with swizzle `s`.
FP8DSA_HOST_DEVICE constexpr uint32_t kmajor_offset(Swizzle s, uint32_t rows, uint32_t row,
                                                    uint32_t k_byte) {
  const uint32_t width = swizzle_width_bytes(s);
  const uint32_t linear = (k_byte / width) * rows * width + row * width + (k_byte % width);
  return swizzle_offset(s, linear);
}

}  // namespace fp8dsa::hopper
