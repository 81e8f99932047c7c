// Device side of TMA (the bulk tensor copy engine): tile loads into shared memory completing on an
// mbarrier. The tensor map is a `const __grid_constant__ CUtensorMap` kernel parameter built on the
// host by make_tensor_map_2d/3d (tma_map.h).
#pragma once

#include <cstdint>

#include <cuda.h>
#include <cuda/ptx>

namespace fp8dsa::hopper {

__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Coordinates are in elements, innermost first.
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1) {
  const int32_t coords[2] = {c0, c1};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar);
}

__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar);
}

}  // namespace fp8dsa::hopper
