// wgmma synchronisation and the accumulator fragment layout. The MMA wrappers themselves are in
// wgmma_e4m3.cuh (generated). A warpgroup is 4 consecutive warps starting at a warp index divisible
// by 4; every wgmma instruction is issued by all 128 threads.
#pragma once

#include <cstdint>

#include "hopper/wgmma_e4m3.cuh"
#include "hopper/wgmma_layout.h"

namespace fp8dsa::hopper {

// Orders register accesses to the accumulators / A fragments before the wgmma that follows.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most kPending committed wgmma groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(kPending >= 0 && kPending <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving reads/writes of an accumulator register across wgmma calls.
__device__ __forceinline__ void wgmma_fence_operand(float& reg) { asm volatile("" : "+f"(reg)::"memory"); }
__device__ __forceinline__ void wgmma_fence_operand(uint32_t& reg) { asm volatile("" : "+r"(reg)::"memory"); }

template <int kRegs>
__device__ __forceinline__ void wgmma_fence_operands(float (&regs)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) wgmma_fence_operand(regs[i]);
}

}  // namespace fp8dsa::hopper
