// A debugging aid for the seesaw and V3.2-row kernels (CMake option FP8DSA_MLA_PHASE_PROBE, off by
// default; the default build's code does not change): per CTA, its SM and clock64 at marked points,
// so that a tuning run can tell where a CTA's time goes (`fp8dsa_sparse_mla_timing phases [v32]`).
// The marks of the last launch stay in a device array of the first kPhaseProbeCtas CTAs, read by
// read_phase_probe and read_v32_phase_probe (launch.h).
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

namespace fp8dsa::detail::sparse_mla {

// What each of a CTA's slots holds: its SM, then clock64 at entry, once the first tile's S is
// complete (math group 0), after the last pair (math group 0), at math group 0's end (its output
// stores issued), and after the producer issued its last tile.
enum PhaseMark : int { kMarkSmid, kMarkEntry, kMarkFirstScore, kMarkLoopEnd, kMarkEnd, kMarkProducerEnd, kNumMarks };
constexpr int kPhaseProbeCtas = 16384;
// Within the pair loop, thread 0 of each math group sums clock() cycles of each step of a pair over
// the CTA's pairs (seesaw_kernel.cuh, run_pair): the next tile's gather wait and lead chain; the mask,
// the row bounds and their exchange; the probabilities and P's store; the wait for both P slots; the
// O^T rescale and the pair's P.V; the next tile's other QK^T chains.
enum PairStep : int { kStepLead, kStepBounds, kStepProbabilities, kStepPWait, kStepValues, kStepChains, kNumPairSteps };
// The V3.2-row kernel (v32_kernel.cuh) uses the same slots per tile: the score group's as group 0
// (the next tile's stage wait and first two chains; the softmax; the wait for a free P slot; P
// published and the other chains with their promotions), value group 0's as group 1 (its stage
// wait and factor table; the wait for P; the rescale and the table barrier; P_b and their weights;
// P.V; the refill of the stage).
enum V32ScoreStep : int { kV32ScoreStart, kV32ScoreSoftmax, kV32ScoreSlotWait, kV32ScoreChains };
enum V32ValueStep : int {
  kV32ValueStage, kV32ValuePWait, kV32ValueRescale, kV32ValuePb, kV32ValueMma, kV32ValueRefill
};
static_assert(static_cast<int>(kV32ValueRefill) < static_cast<int>(kNumPairSteps),
              "the V3.2 steps fit the pair-step slots");

#if defined(FP8DSA_MLA_PHASE_PROBE)
__device__ unsigned long long g_phase_probe[kPhaseProbeCtas][kNumMarks];

__device__ __forceinline__ void phase_mark(PhaseMark mark) {
  if (blockIdx.x >= kPhaseProbeCtas) return;
  unsigned long long v;
  if (mark == kMarkSmid) {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    v = s;
  } else {
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(v));
  }
  g_phase_probe[blockIdx.x][mark] = v;
}
#define FP8DSA_PHASE_MARK(condition, mark) \
  do {                                     \
    if (condition) phase_mark(mark);       \
  } while (0)

__device__ unsigned g_pair_steps[kPhaseProbeCtas][2][kNumPairSteps];

// One math group's step clock: `step` adds the cycles since the previous step (thread 0 only).
struct PairStepClock {
  unsigned last, sums[kNumPairSteps];
  __device__ __forceinline__ PairStepClock() : last(static_cast<unsigned>(clock())), sums{} {}
  __device__ __forceinline__ void restart() { last = static_cast<unsigned>(clock()); }
  __device__ __forceinline__ void step(int s) {
    const unsigned now = static_cast<unsigned>(clock());
    sums[s] += now - last;
    last = now;
  }
  __device__ __forceinline__ void store(bool thread0, int group) const {
    if (!thread0 || blockIdx.x >= kPhaseProbeCtas) return;
    for (int s = 0; s < kNumPairSteps; ++s) g_pair_steps[blockIdx.x][group][s] = sums[s];
  }
};
// The arrays are defined per translation unit (whole-program device code): these readers have
// internal linkage, so that each kernel's instantiation file reads its own copies.
namespace {
inline cudaError_t copy_phase_probe(std::vector<uint64_t>* marks) {
  marks->assign(static_cast<size_t>(kPhaseProbeCtas) * kNumMarks, 0);
  return cudaMemcpyFromSymbol(marks->data(), g_phase_probe, marks->size() * sizeof(uint64_t));
}
inline cudaError_t copy_pair_steps(std::vector<uint32_t>* sums) {
  sums->assign(static_cast<size_t>(kPhaseProbeCtas) * 2 * kNumPairSteps, 0);
  return cudaMemcpyFromSymbol(sums->data(), g_pair_steps, sums->size() * sizeof(uint32_t));
}
}  // namespace

#define FP8DSA_PAIR_STEP_CLOCK(name) PairStepClock name
#define FP8DSA_PAIR_STEP(clock, s) clock.step(s)
#define FP8DSA_PAIR_STEP_RESTART(clock) clock.restart()
#define FP8DSA_PAIR_STEP_STORE(clock, thread0, group) clock.store(thread0, group)
#else
#define FP8DSA_PAIR_STEP_CLOCK(name) \
  do {                               \
  } while (0)
#define FP8DSA_PAIR_STEP(clock, s) \
  do {                             \
  } while (0)
#define FP8DSA_PAIR_STEP_RESTART(clock) \
  do {                                  \
  } while (0)
#define FP8DSA_PAIR_STEP_STORE(clock, thread0, group) \
  do {                                                \
  } while (0)
#define FP8DSA_PHASE_MARK(condition, mark) \
  do {                                     \
  } while (0)
#endif

}  // namespace fp8dsa::detail::sparse_mla
