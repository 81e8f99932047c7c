// mbarrier helpers over CCCL's cuda::ptx (which has the instructions but not the spin loop), named
// after what a pipeline does with them: a "full" barrier is armed with the bytes a stage expects and
// completes when they land; an "empty" barrier collects the consumers' releases.
#pragma once

#include <cstdint>

#include <cuda/ptx>

namespace fp8dsa::hopper {

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  cuda::ptx::mbarrier_init(bar, arrivals);
}

// Makes barrier initialisation visible to the async proxy (TMA) and the other threads.
__device__ __forceinline__ void mbarrier_init_fence() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

// One arrival that also tells the barrier to expect `bytes` of async-copy traffic.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                       cuda::ptx::space_shared, bar, bytes);
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  cuda::ptx::mbarrier_arrive(bar);
}

// Spins until the barrier's phase with the given parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

// The same on a barrier given by its shared-memory address: a warpgroup short of registers keeps one
// 32-bit base instead of 64-bit generic pointers to each barrier.
__device__ __forceinline__ bool mbarrier_try_wait_parity_at(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait_at(uint32_t bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity_at(bar, parity)) {
  }
}
__device__ __forceinline__ void mbarrier_arrive_at(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

}  // namespace fp8dsa::hopper
