// Warp-specialisation primitives: register reallocation, single-thread election, proxy fences.
#pragma once

#include <cstdint>

namespace fp8dsa::hopper {

// setmaxnreg: all four warps of a warpgroup must execute it, and it only takes effect when the
// kernel has a register cap at entry (__launch_bounds__(threads, 1)).
template <int kRegs>
__device__ __forceinline__ void warpgroup_reg_alloc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes multiples of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void warpgroup_reg_dealloc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes multiples of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// True in exactly one lane of the (fully active) warp.
__device__ __forceinline__ bool elect_one_sync() {
  uint32_t is_elected = 0;
  asm volatile(
      "{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(is_elected));
  return is_elected != 0;
}

// Makes this thread's ordinary shared-memory writes visible to the async proxy (wgmma, TMA), or
// orders its ordinary reads before a later TMA overwrite. Put it before the barrier / arrive.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Named barrier over `threads` threads (a multiple of 32); id 0 is __syncthreads'.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Dynamic shared memory is only guaranteed 16-byte aligned: the first byte at or after `p` on a
// 1024-byte boundary, where swizzle patterns (and so wgmma / TMA tiles) start.
__device__ __forceinline__ uint8_t* align_to_swizzle_atom(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t{1023});
}

}  // namespace fp8dsa::hopper
