// Pieces of the sparse MLA kernels' pipelines that are neither a GEMM nor the softmax: the
// mbarrier wait (optionally bounded, for debugging a stuck pipeline), the CTA's aligned shared
// memory base and the kernels' barrier sets.
#pragma once

#include <cstdint>

#include <cuda/ptx>

#include "hopper/mbarrier.cuh"
#include "hopper/warpgroup.cuh"

namespace fp8dsa::detail::sparse_mla {

#if defined(FP8DSA_MLA_HANG_CHECK)
// A wait this long is a pipeline bug: a CTA's whole key loop takes microseconds (well under a
// second even under compute-sanitizer).
constexpr uint64_t kHangCheckNs = 10'000'000'000ull;

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(ns));
  return ns;
}
#endif

// Waits for the phase of `bar` with this parity. With FP8DSA_MLA_HANG_CHECK (a debugging build
// option, off by default) it traps after kHangCheckNs instead of hanging, so that a pipeline bug
// fails a test with an error; a trap in a warpgroup that issues wgmma makes ptxas serialise its
// wgmmas (C7510), so such a build is for finding hangs, not for timing. The bound is time, not a
// count of tries: one try_wait may suspend the thread for a hardware-chosen while.
__device__ __forceinline__ void wait_barrier(uint64_t* bar, uint32_t parity) {
#if defined(FP8DSA_MLA_HANG_CHECK)
  if (cuda::ptx::mbarrier_try_wait_parity(bar, parity)) return;
  const uint64_t start = global_timer_ns();
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
    if (global_timer_ns() - start > kHangCheckNs) __trap();
  }
#else
  hopper::mbarrier_wait(bar, parity);
#endif
}

// wait_barrier on a barrier given by its shared-memory address.
__device__ __forceinline__ void wait_barrier_at(uint32_t bar, uint32_t parity) {
#if defined(FP8DSA_MLA_HANG_CHECK)
  if (hopper::mbarrier_try_wait_parity_at(bar, parity)) return;
  const uint64_t start = global_timer_ns();
  while (!hopper::mbarrier_try_wait_parity_at(bar, parity)) {
    if (global_timer_ns() - start > kHangCheckNs) __trap();
  }
#else
  hopper::mbarrier_wait_at(bar, parity);
#endif
}

// The dynamic shared memory base aligned to 1024 bytes (wgmma descriptors assume every tile starts
// on a swizzle-pattern boundary), as a shared address and as a generic pointer.
struct SmemBase {
  uint32_t address;
  uint8_t* ptr;
};
__device__ __forceinline__ SmemBase aligned_smem_base(uint8_t* smem_raw) {
  const uint32_t raw = hopper::smem_address(smem_raw);
  const uint32_t aligned = (raw + 1023u) & ~1023u;
  return {aligned, smem_raw + (aligned - raw)};
}

// The mbarriers of a kernel whose producer warpgroup gathers the K tiles (the seesaw and small-head
// kernels), at kBarrierOffset in this order:
//   full[kStages]   tile gathered: one cp.async arrival per producer thread;
//   empty[kStages]  every consuming thread (kConsumerThreads) is done with the stage;
//   q_full          Q gathered: one cp.async arrival per producer thread.
template <int kStages, int kConsumerThreads, uint32_t kBarrierOffset>
struct ProducerBarriers {
  static constexpr uint32_t kFullOffset = kBarrierOffset;
  static constexpr uint32_t kEmptyOffset = kFullOffset + 8 * kStages;
  static constexpr uint32_t kQFullOffset = kEmptyOffset + 8 * kStages;
  static constexpr uint32_t kCount = 2 * kStages + 1;

  uint64_t* full;
  uint64_t* empty;
  uint64_t* q_full;

  __device__ __forceinline__ static ProducerBarriers at(uint8_t* smem) {
    return {reinterpret_cast<uint64_t*>(smem + kFullOffset), reinterpret_cast<uint64_t*>(smem + kEmptyOffset),
            reinterpret_cast<uint64_t*>(smem + kQFullOffset)};
  }
  __device__ __forceinline__ void init() const {
    for (int s = 0; s < kStages; ++s) {
      hopper::mbarrier_init(&full[s], 128);
      hopper::mbarrier_init(&empty[s], kConsumerThreads);
    }
    hopper::mbarrier_init(q_full, 128);
    hopper::mbarrier_init_fence();
  }
};

// The mbarriers of a kernel of one score and two value warpgroups (v32_kernel.cuh), for a config C with
// kNumKStages, kNumPSlots, kNumValueGroups and kBarrierOffset.
template <class C>
struct ScoreValueBarriers {
  uint64_t* full;     // [kNumKStages] tile gathered: one cp.async arrival per value-group thread
  uint64_t* p_full;   // [kNumPSlots] P, alphas and flags of a tile written: the score group (128)
  uint64_t* p_empty;  // [kNumPSlots] every value-group thread is done with the slot
  uint64_t* q_full;   // Q in shared memory: one arrival per value-group thread

  __device__ __forceinline__ static ScoreValueBarriers at(uint8_t* smem) {
    ScoreValueBarriers b;
    b.full = reinterpret_cast<uint64_t*>(smem + C::kBarrierOffset);
    b.p_full = b.full + C::kNumKStages;
    b.p_empty = b.p_full + C::kNumPSlots;
    b.q_full = b.p_empty + C::kNumPSlots;
    return b;
  }

  __device__ __forceinline__ void init() const {
    for (int s = 0; s < C::kNumKStages; ++s) hopper::mbarrier_init(&full[s], 128 * C::kNumValueGroups);
    for (int s = 0; s < C::kNumPSlots; ++s) {
      hopper::mbarrier_init(&p_full[s], 128);
      hopper::mbarrier_init(&p_empty[s], 128 * C::kNumValueGroups);
    }
    hopper::mbarrier_init(q_full, 128 * C::kNumValueGroups);
    hopper::mbarrier_init_fence();
  }
};

}  // namespace fp8dsa::detail::sparse_mla
