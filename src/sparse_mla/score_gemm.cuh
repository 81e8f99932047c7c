// The score GEMM of the FP8 sparse MLA kernels: S = A B^T over the 576-byte rows, 18 e4m3 wgmma
// k-steps of 32 bytes, both operands K-major SW64 tiles in shared memory.
//
// Precision: the e4m3 wgmma does not accumulate in full f32 (its adder keeps about 13 mantissa
// bits, truncating), so a long chain of k-steps into one accumulator loses the low bits of every
// step's products against the growing sum. The k-steps therefore run as kQkChains chains, each
// into a fresh accumulator, whose results are added in f32 ("QK^T chains"; DeepGEMM promotes every
// 4 k-steps alike). More chains: smaller score error, more f32 adds and accumulator registers.
#pragma once

#include <cstdint>
#include <type_traits>

#include "hopper/smem_descriptor.h"
#include "hopper/wgmma.cuh"
#include "sparse_mla/config.h"

namespace fp8dsa::detail::sparse_mla {

// Byte offset of k-step ks (32 bytes) in a K-major SW64 tile of `rows` rows: the same offset of the
// descriptor start address as kmajor_descriptor computes, so descriptors are built once and
// advanced by constants (recomputing them cost ~25 instructions per wgmma).
__host__ __device__ constexpr uint32_t kstep_offset(int rows, int ks) {
  return static_cast<uint32_t>((ks * 32 / 64) * rows * 64 + (ks * 32) % 64);
}

// The score GEMM's shape: A (M = 64 rows) times B (kN rows). The 64-head kernel has A = Q (64
// heads) and B = the K tile (64 keys); the small-head kernel the transposed orientation, A = the K
// tile and B = Q (kN = h heads).
template <int kNT, int kRowsAT>
struct ScoreShape {
  static constexpr int kN = kNT, kRowsA = kRowsAT, kRowsB = kNT, kAccRegs = kNT / 2;
};

// Issues score k-steps [kFirst, kFirst + kCount) into acc (the first one overwrites it). desc_a /
// desc_b: descriptors of k-step 0 of the A and B tiles.
template <class S, int kFirst, int kCount>
__device__ __forceinline__ void issue_qk(float (&acc)[S::kAccRegs], uint64_t desc_a, uint64_t desc_b) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    hopper::WgmmaE4m3<S::kN>::ss(acc, hopper::advance_descriptor(desc_a, kstep_offset(S::kRowsA, kFirst + i)),
                                 hopper::advance_descriptor(desc_b, kstep_offset(S::kRowsB, kFirst + i)), i > 0);
  }
}

// Issues chain c of kQkChains into acc as one committed wgmma group.
// Chains take ceil(18 / kQkChains) k-steps each, the last one what is left (5 chains: 4, 4, 4, 4, 2:
// DeepSeek-V3's promotion every 128 elements).
template <int kQkChains>
constexpr int kQkStepsPerChain = (MlaShape::kQkSteps + kQkChains - 1) / kQkChains;

template <class S, int kQkChains, int c>
__device__ __forceinline__ void issue_qk_chain(float (&acc)[S::kAccRegs], uint64_t desc_a, uint64_t desc_b) {
  constexpr int kSteps = kQkStepsPerChain<kQkChains>;
  constexpr int kFirst = c * kSteps;
  constexpr int kCount = kFirst + kSteps <= MlaShape::kQkSteps ? kSteps : MlaShape::kQkSteps - kFirst;
  hopper::wgmma_fence_operands(acc);
  hopper::wgmma_fence();
  issue_qk<S, kFirst, kCount>(acc, desc_a, desc_b);
  hopper::wgmma_commit_group();
}

// s += part, once the wgmmas that wrote both are complete (the register fences keep the adds
// after the wait that precedes the call).
template <int kRegs>
__device__ __forceinline__ void add_into(float (&s)[kRegs], float (&part)[kRegs]) {
  hopper::wgmma_fence_operands(s);
  hopper::wgmma_fence_operands(part);
#pragma unroll
  for (int r = 0; r < kRegs; ++r) s[r] += part[r];
}

// All kQkChains chains with two of them in flight behind the one being added, so that the tensor
// pipe never waits for the f32 adds: chain 0 goes into s, chain c >= 1 into part[(c - 1) % 2];
// before chain c >= 3 reuses its accumulator, chain c - 2 (its previous user) is waited for and
// added. start_qk_chains issues the first kStart chains (each its own committed group, at most 3);
// finish_qk_chains<..., kStart> the rest, and returns with every chain complete and added into s.
// A caller may run other work between the two (with kStart = 2, part[1] stays free for it; with
// kStart = kStartedQkChains, older wgmma groups can be waited for with wgmma_wait_group<kStart>).
// Compile-time throughout: a wait count chosen at run time makes ptxas serialise every wgmma (C7514).
template <int kQkChains>
constexpr int kStartedQkChains = kQkChains < 3 ? kQkChains : 3;

template <class S, int kQkChains, int kStart = kStartedQkChains<kQkChains>>
__device__ __forceinline__ void start_qk_chains(float (&s)[S::kAccRegs], float (&part)[2][S::kAccRegs],
                                                uint64_t desc_a, uint64_t desc_b) {
  static_assert(kQkChains >= 1 && (kQkChains - 1) * kQkStepsPerChain<kQkChains> < MlaShape::kQkSteps,
                "every QK^T chain has at least one k-step");
  static_assert(kStart >= 1 && kStart <= kStartedQkChains<kQkChains>, "chains 0..2 at most go ahead");
  issue_qk_chain<S, kQkChains, 0>(s, desc_a, desc_b);
  if constexpr (kStart > 1) issue_qk_chain<S, kQkChains, 1>(part[0], desc_a, desc_b);
  if constexpr (kStart > 2) issue_qk_chain<S, kQkChains, 2>(part[1], desc_a, desc_b);
}

// The schedule of finish_qk_chains with the chains and their promotion as policies, so that every
// kernel's QK^T runs the same schedule: issue(acc, Chain<c>{}) issues chain c into acc as one
// committed wgmma group; promote(s, part, Chain<c>{}) folds the completed chain c (in part) into s
// (the 576-byte rows: add_into; the V3.2 rows: times the keys' block scales, v32_kernel.cuh).
// Chain 0 is in s itself (the V3.2 rows' policy scales it when it folds chain 1). Called with c = the
// number of chains already issued (1 to 3).
template <int c>
using Chain = std::integral_constant<int, c>;

template <int kChains, int c, int kRegs, class Issue, class Promote>
__device__ __forceinline__ void finish_chains(float (&s)[kRegs], float (&part)[2][kRegs], Issue&& issue,
                                              Promote&& promote) {
  if constexpr (c < kChains && c < 3) {
    // Chains 1 and 2 take accumulators nobody used yet.
    issue(part[c - 1], Chain<c>{});
    finish_chains<kChains, c + 1>(s, part, issue, promote);
  } else if constexpr (c < kChains) {
    hopper::wgmma_wait_group<1>();  // chain c - 2 (and every one before it) is complete
    promote(s, part[(c - 1) % 2], Chain<c - 2>{});
    issue(part[(c - 1) % 2], Chain<c>{});
    finish_chains<kChains, c + 1>(s, part, issue, promote);
  } else {
    // In flight now: chains kChains - 2 and kChains - 1 (or chain 0 alone).
    if constexpr (kChains > 1) {
      hopper::wgmma_wait_group<1>();
      if constexpr (kChains > 2) promote(s, part[(kChains - 3) % 2], Chain<kChains - 2>{});
    }
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(s);
    if constexpr (kChains > 1) promote(s, part[(kChains - 2) % 2], Chain<kChains - 1>{});
  }
}

template <class S, int kQkChains, int c = kStartedQkChains<kQkChains>>
__device__ __forceinline__ void finish_qk_chains(float (&s)[S::kAccRegs], float (&part)[2][S::kAccRegs],
                                                 uint64_t desc_a, uint64_t desc_b) {
  finish_chains<kQkChains, c>(
      s, part,
      [&](float (&acc)[S::kAccRegs], auto chain) {
        issue_qk_chain<S, kQkChains, decltype(chain)::value>(acc, desc_a, desc_b);
      },
      [](float (&sum)[S::kAccRegs], float (&done)[S::kAccRegs], auto) { add_into(sum, done); });
}

// A QK^T chain plan with a lead: chain 0 of kLead k-steps, then chains of kStep k-steps (the last
// one what is left). The lead chain can be issued early, into an accumulator of its own, and the
// later chains finished with one more (finish_after_lead).
template <int kLead, int kStep>
struct QkLeadPlan {
  static_assert(kLead >= 1 && kLead <= MlaShape::kQkSteps && kStep >= 1, "every chain has a k-step");
  static constexpr int kChains = 1 + (MlaShape::kQkSteps - kLead + kStep - 1) / kStep;
  static constexpr int first(int c) { return c == 0 ? 0 : kLead + (c - 1) * kStep; }
  static constexpr int count(int c) {
    return c == 0 ? kLead : (first(c) + kStep <= MlaShape::kQkSteps ? kStep : MlaShape::kQkSteps - first(c));
  }
};

// Issues chain c of Plan into acc as one committed wgmma group.
template <class S, class Plan, int c>
__device__ __forceinline__ void issue_plan_chain(float (&acc)[S::kAccRegs], uint64_t desc_a, uint64_t desc_b) {
  hopper::wgmma_fence_operands(acc);
  hopper::wgmma_fence();
  issue_qk<S, Plan::first(c), Plan::count(c)>(acc, desc_a, desc_b);
  hopper::wgmma_commit_group();
}

// The serial form of finish_chains' schedule, for a kernel with one accumulator to spare (the
// seesaw: S, its lead chain's accumulator and O^T fill its registers): chain c into `fresh`, waited
// for, folded into `sum` by promote(sum, fresh, Chain<c>{}); the last chain the other way round,
// promote(fresh, sum, ...), so that the whole score ends in `fresh` without a copy (a symmetric
// promotion, as the 576-byte rows' add_into). Chain 0 is in `sum`, issued, maybe not complete.
template <int kChains, int c = 1, int kRegs, class Issue, class Promote>
__device__ __forceinline__ void finish_chains_serial(float (&fresh)[kRegs], float (&sum)[kRegs], Issue&& issue,
                                                     Promote&& promote) {
  if constexpr (kChains == 1) {
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(sum);
#pragma unroll
    for (int r = 0; r < kRegs; ++r) fresh[r] = sum[r];
  } else if constexpr (c < kChains) {
    issue(fresh, Chain<c>{});
    hopper::wgmma_wait_group<0>();
    if constexpr (c + 1 < kChains) {
      promote(sum, fresh, Chain<c>{});
      finish_chains_serial<kChains, c + 1>(fresh, sum, issue, promote);
    } else {
      promote(fresh, sum, Chain<c>{});
    }
  }
}

// Chains 1.. of Plan after the lead chain, which went into `lead` (issued, maybe not complete):
// finish_chains_serial with each chain added in f32. Returns with every chain complete and the whole
// score in s.
template <class S, class Plan>
__device__ __forceinline__ void finish_after_lead(float (&s)[S::kAccRegs], float (&lead)[S::kAccRegs],
                                                  uint64_t desc_a, uint64_t desc_b) {
  finish_chains_serial<Plan::kChains>(
      s, lead,
      [&](float (&acc)[S::kAccRegs], auto chain) {
        issue_plan_chain<S, Plan, decltype(chain)::value>(acc, desc_a, desc_b);
      },
      [](float (&into)[S::kAccRegs], float (&done)[S::kAccRegs], auto) { add_into(into, done); });
}

}  // namespace fp8dsa::detail::sparse_mla
