// Plain cp.async (Ampere-style: 16-byte L2-cached, and 4-byte) for row gathers that TMA cannot express.
// Tiles written this way are not formally in the async proxy: fence (fence_proxy_async_smem) before
// wgmma reads them.
#pragma once

#include <cstdint>

namespace fp8dsa::hopper {

// Copies 16 bytes global -> shared; when `valid` is false the 16 shared bytes are zero-filled and
// global memory is not read (src may then be any address).
__device__ __forceinline__ void cp_async_16_zfill(uint32_t smem_dst, const void* gmem_src, bool valid) {
  const uint32_t src_bytes = valid ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}

// Copies 4 bytes global -> shared (L1-allocating: the only size class cp.async.cg lacks), zero-filling
// when `valid` is false. For small scattered fields, e.g. one f32 of a row.
__device__ __forceinline__ void cp_async_4_zfill(uint32_t smem_dst, const void* gmem_src, bool valid) {
  const uint32_t src_bytes = valid ? 4u : 0u;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_dst), "l"(gmem_src), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Makes the mbarrier track completion of this thread's prior cp.async operations (one arrival
// each thread, without incrementing the pending count: init the barrier with the thread count).
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}

}  // namespace fp8dsa::hopper
