// Which element of an m64 wgmma operand or accumulator a thread holds in which register (host and
// device, so that layout arithmetic built on it can be checked on the CPU). A warpgroup's warp
// `warp` (0..3) owns rows 16 warp .. 16 warp + 15.
#pragma once

#include "core/host_device.h"

namespace fp8dsa::hopper {

// Accumulator layout of m64nN (f32): thread `lane` of warp `warp` (0..3 inside the warpgroup) holds
// register r at row warp*16 + lane/4 + 8*((r/2)%2), column (r/4)*8 + (lane%4)*2 + r%2.
FP8DSA_HOST_DEVICE constexpr int acc_row(int warp, int lane, int r) {
  return warp * 16 + lane / 4 + 8 * ((r / 2) % 2);
}
FP8DSA_HOST_DEVICE constexpr int acc_col(int lane, int r) {
  return (r / 4) * 8 + (lane % 4) * 2 + r % 2;
}

// A-from-registers layout of m64k32 (8-bit): register j (0..3) of a thread holds 4 consecutive K
// bytes at row warp*16 + lane/4 + 8*(j%2), K byte (lane%4)*4 + 16*(j/2).
FP8DSA_HOST_DEVICE constexpr int a_frag_row(int warp, int lane, int j) {
  return warp * 16 + lane / 4 + 8 * (j % 2);
}
FP8DSA_HOST_DEVICE constexpr int a_frag_k(int lane, int j) {
  return (lane % 4) * 4 + 16 * (j / 2);
}

}  // namespace fp8dsa::hopper
