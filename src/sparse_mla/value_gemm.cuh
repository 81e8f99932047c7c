// The P.V of the 64-head and small-head kernels, in the transposed orientation O^T[d_v][heads] += V^T . P^T, so that no
// transposed copy of V is ever written: e4m3 wgmma takes only K-major operands, and with V^T as the
// *register* A operand its fragments can be assembled from plain shared loads of the gathered
// (K-major [keys][576]) rows and byte permutes. The layout: value_layout.h.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#include "hopper/smem_access.cuh"
#include "hopper/wgmma.cuh"
#include "sparse_mla/value_layout.h"

namespace fp8dsa::detail::sparse_mla {

// The A fragments of k-step ks from the K tile at shared address k_tile, from 8-byte shared loads
// (the small-head kernels).
__device__ __forceinline__ void load_value_fragments(uint32_t (&frag)[4][4], uint32_t k_tile, const ValueLoads& v,
                                                     int ks) {
  build_value_fragments(frag, v, ks,
                        [&](uint32_t offset, uint32_t (&words)[2]) { hopper::lds64(words, k_tile + offset); });
}

// The same fragments from ldmatrix.x4.trans (value_layout.h: value_ldsm_offset), block mb's M rows
// at value_dv_ldsm's columns: half the instructions; the 64-head kernel's form (3.2-4.8% less time at
// h = 128 than the 8-byte loads, H100, bench/journal/2026-12-07.md, fortieth session).
__device__ __forceinline__ void load_value_fragments_ldsm(uint32_t (&frag)[4][4], uint32_t k_tile, uint32_t offset,
                                                          int ks) {
#pragma unroll
  for (int mb = 0; mb < 4; ++mb) {
    uint32_t x[4];
    hopper::ldsm_x4_trans(x, k_tile + offset + value_ldsm_step(mb, ks));
    value_fragment_from_ldsm(frag[mb], x);
  }
}

// O^T *= the tile's rescale factors (alpha: the slot's [64 heads] f32): registers 4c + {0, 2} of
// every block are head value_head(lane, c, 0), 4c + {1, 3} the next.
__device__ __forceinline__ void rescale_value_accumulators(float (&o)[4][32], const float* alpha, int lane) {
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const float2 a = *reinterpret_cast<const float2*>(alpha + value_head(lane, c, 0));
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) {
      o[mb][4 * c + 0] *= a.x;
      o[mb][4 * c + 1] *= a.y;
      o[mb][4 * c + 2] *= a.x;
      o[mb][4 * c + 3] *= a.y;
    }
  }
}

// O^T[mb] += V^T[mb] . P^T for one k-step as one committed wgmma group, not waited for: the
// fragments and O^T stay in use until the caller's wgmma_wait_group covers it. Blocks 0, 1 take
// the P^T of desc_lo, blocks 2, 3 that of desc_hi: the same P for 576-byte rows, the two scale
// blocks' P_b for V3.2 rows (v32_kernel.cuh).
__device__ __forceinline__ void issue_value_mma_step(float (&o)[4][32], uint32_t (&frag)[4][4], uint64_t desc_lo,
                                                     uint64_t desc_hi) {
#pragma unroll
  for (int mb = 0; mb < 4; ++mb) {
    hopper::wgmma_fence_operands(o[mb]);
#pragma unroll
    for (int j = 0; j < 4; ++j) hopper::wgmma_fence_operand(frag[mb][j]);
  }
  hopper::wgmma_fence();
#pragma unroll
  for (int mb = 0; mb < 4; ++mb) hopper::WgmmaE4m3<64>::rs(o[mb], frag[mb], mb < 2 ? desc_lo : desc_hi, true);
  hopper::wgmma_commit_group();
}

// After a wait that covers issue_value_mma_step's group: O^T and the fragments are the thread's
// again (the register fences keep later uses after the wait).
__device__ __forceinline__ void value_mma_operands_free(float (&o)[4][32], uint32_t (&frag)[4][4]) {
#pragma unroll
  for (int mb = 0; mb < 4; ++mb) {
    hopper::wgmma_fence_operands(o[mb]);
#pragma unroll
    for (int j = 0; j < 4; ++j) hopper::wgmma_fence_operand(frag[mb][j]);
  }
}

// The same, committed and waited for (the fragments may be reused on return).
__device__ __forceinline__ void value_mma_step(float (&o)[4][32], uint32_t (&frag)[4][4], uint64_t desc_lo,
                                               uint64_t desc_hi) {
  issue_value_mma_step(o, frag, desc_lo, desc_hi);
  hopper::wgmma_wait_group<0>();
  value_mma_operands_free(o, frag);
}

// The output store of every sparse MLA kernel: the d_v columns of one head that a thread holds in
// its 4 O^T blocks, block mb's row halves hh = 0, 1 at address(mb) and the next column of the
// head's output row (value_layout.h), written as bf16 of value(mb, hh) (O^T times the head's output
// factor). kBlocksPerStore consecutive blocks whose columns follow each other go out as one store of
// 4 kBlocksPerStore bytes at address(mb) of the first: 1 for value_dv_ldsm's blocks (64 columns
// apart), 2 for value_dv_v32's (two 4-column runs, a scale block apart), 4 for value_dv's (8 columns).
template <int kBlocksPerStore, class Value, class Address>
__device__ __forceinline__ void store_output_head(Value&& value, Address&& address) {
  static_assert(kBlocksPerStore == 1 || kBlocksPerStore == 2 || kBlocksPerStore == 4, "a store of 4, 8 or 16 bytes");
  if constexpr (kBlocksPerStore == 1) {
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) {
      *reinterpret_cast<__nv_bfloat162*>(address(mb)) = __floats2bfloat162_rn(value(mb, 0), value(mb, 1));
    }
  } else {
    uint32_t words[4];
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(value(mb, 0), value(mb, 1));
      words[mb] = *reinterpret_cast<const uint32_t*>(&v);
    }
#pragma unroll
    for (int mb = 0; mb < 4; mb += kBlocksPerStore) {
      __nv_bfloat16* dst = address(mb);
      if constexpr (kBlocksPerStore == 2) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(words[mb], words[mb + 1]);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
  }
}

}  // namespace fp8dsa::detail::sparse_mla
