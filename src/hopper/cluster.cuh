// Thread-block clusters (sm_90): the CTA's rank, addresses in a peer CTA's shared memory
// (distributed shared memory), arrivals on a peer's mbarrier, bulk copies from the own shared
// memory into a peer's, and the cluster-wide barrier.
//
// Addresses here are 32-bit shared::cluster addresses. A CTA's own shared::cta address is also a
// valid shared::cluster address of its own memory; peer_address maps it to the same offset in
// another CTA of the cluster.
#pragma once

#include <cstdint>

#include <cuda/ptx>

namespace fp8dsa::hopper {

__device__ __forceinline__ uint32_t cluster_ctarank() { return cuda::ptx::get_sreg_cluster_ctarank(); }

__device__ __forceinline__ uint32_t peer_address(uint32_t smem_address, uint32_t rank) {
  uint32_t mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(mapped) : "r"(smem_address), "r"(rank));
  return mapped;
}

// One arrival (release at cluster scope) on an mbarrier in any CTA of the cluster.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}

// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) of this CTA's shared memory to
// cluster_dst, completing `bytes` of transaction count on cluster_bar (an mbarrier in the CTA that
// owns cluster_dst). The source is read through the async proxy: data written there by ordinary
// stores or cp.async needs fence_proxy_async_smem first.
__device__ __forceinline__ void bulk_copy_shared_to_cluster(uint32_t cluster_dst, uint32_t smem_src, uint32_t bytes,
                                                            uint32_t cluster_bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   cluster_dst),
               "r"(smem_src), "r"(bytes), "r"(cluster_bar)
               : "memory");
}

// Every thread of every CTA of the cluster: the cluster's execution barrier, with release / acquire
// of shared memory (both own and distributed).
__device__ __forceinline__ void cluster_sync() {
  cuda::ptx::barrier_cluster_arrive(cuda::ptx::sem_release);
  cuda::ptx::barrier_cluster_wait(cuda::ptx::sem_acquire);
}

}  // namespace fp8dsa::hopper
