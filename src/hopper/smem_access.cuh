// Plain shared-memory loads and stores by 32-bit shared address (what wgmma descriptors and
// swizzle arithmetic produce).
#pragma once

#include <cstdint>

namespace fp8dsa::hopper {

__device__ __forceinline__ uint32_t lds32(uint32_t address) {
  uint32_t r;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(r) : "r"(address) : "memory");
  return r;
}
__device__ __forceinline__ void lds64(uint32_t (&r)[2], uint32_t address) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address) : "memory");
}
__device__ __forceinline__ void lds128(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
// ldmatrix.x4.trans over 16-bit elements: four 8 x 8 matrices whose rows (16 bytes each) lanes
// 8i .. 8i + 7 address for matrix i; lane l receives, in r[i], elements (l / 4, 2 (l % 4)) and
// (l / 4, 2 (l % 4) + 1) of matrix i transposed, i.e. 16-bit column l / 4 of source rows 2 (l % 4)
// and 2 (l % 4) + 1.
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
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

__device__ __forceinline__ void sts64(uint32_t address, uint32_t a, uint32_t b) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};\n" ::"r"(address), "r"(a), "r"(b) : "memory");
}
__device__ __forceinline__ void sts128(uint32_t address, const uint32_t (&v)[4]) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(v[0]), "r"(v[1]), "r"(v[2]),
               "r"(v[3])
               : "memory");
}

}  // namespace fp8dsa::hopper
