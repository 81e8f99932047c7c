// The wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
//   bits  0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
//   bits 49-51 base offset, 62-63 layout (swizzle) type.
#pragma once

#include <cstdint>

#include "hopper/swizzle.h"

namespace fp8dsa::hopper {

FP8DSA_HOST_DEVICE constexpr uint64_t encode_descriptor_field(uint32_t bytes) {
  return static_cast<uint64_t>((bytes & 0x3FFFFu) >> 4);
}

// base_offset stays 0: every tile in this project starts on its swizzle pattern's boundary
// (1024 B for 128B), which the kernels static_assert / check.
FP8DSA_HOST_DEVICE constexpr uint64_t make_smem_descriptor(uint32_t smem_address, Swizzle swizzle,
                                                           uint32_t leading_byte_offset,
                                                           uint32_t stride_byte_offset) {
  return encode_descriptor_field(smem_address) | (encode_descriptor_field(leading_byte_offset) << 16) |
         (encode_descriptor_field(stride_byte_offset) << 32) |
         (static_cast<uint64_t>(swizzle) << 62);
}

// Descriptor for a K-major swizzled operand tile (the layout kmajor_offset() describes), starting
// `k_byte` bytes into K. For swizzled K-major layouts LBO is unused (set to 1 by convention) and SBO
// is the distance between 8-row groups: 8 * swizzle width. A K step inside a swizzle atom adds its
// byte count to the start address; crossing an atom moves to the next column block.
FP8DSA_HOST_DEVICE constexpr uint64_t kmajor_descriptor(uint32_t tile_smem_address, Swizzle swizzle,
                                                        uint32_t rows, uint32_t k_byte) {
  const uint32_t width = swizzle_width_bytes(swizzle);
  const uint32_t start = tile_smem_address + (k_byte / width) * rows * width + (k_byte % width);
  return make_smem_descriptor(start, swizzle, 16u, 8u * width);
}

// Adds a byte offset to a descriptor's start address (the field is in 16-byte units). The sum stays
// in the low word (a shared-memory address is below 2^18 bytes), so only the low word is added to:
// a 64-bit add with carry cost every wgmma of a k-step loop about six more instructions.
FP8DSA_HOST_DEVICE constexpr uint64_t advance_descriptor(uint64_t descriptor, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(descriptor) + (bytes >> 4);
  return (descriptor & 0xFFFFFFFF00000000ull) | lo;
}

}  // namespace fp8dsa::hopper
