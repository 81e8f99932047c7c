// prmt.b32 (byte permute), with a host form so that layout code built on it can be checked on the
// CPU: byte i of the result is byte (selector nibble i) of the 8-byte value {b, a} (a = bytes 0-3,
// b = bytes 4-7). Selector nibbles must be 0..7 (no sign-replication modes).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace fp8dsa::hopper {

FP8DSA_HOST_DEVICE uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
#else
  const uint64_t x = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>((x >> (8 * ((selector >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
#endif
}

}  // namespace fp8dsa::hopper
