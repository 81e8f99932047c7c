// Plain shared-memory loads and stores by 32-bit shared address (what wgmma descriptors and
// swizzle arithmetic produce).
#pragma once

#include <cstdint>

namespace fp8dsa::hopper {

__device__ __forceinline__ void lds64(uint32_t (&r)[2], uint32_t address) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address) : "memory");
}
__device__ __forceinline__ void lds128(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void sts8(uint32_t address, uint32_t v) {
  asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
}
__device__ __forceinline__ void sts16(uint32_t address, uint16_t v) {
  asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(address), "h"(v) : "memory");
}
__device__ __forceinline__ void sts32(uint32_t address, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
}

}  // namespace fp8dsa::hopper
