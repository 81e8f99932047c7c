// A debugging aid for the seesaw kernel (CMake option FP8DSA_MLA_PHASE_PROBE, off by default; the
// default build's code does not change): per CTA, its SM and clock64 at marked points, so that a
// tuning run can tell where a CTA's time goes (`fp8dsa_sparse_mla_timing phases`). The marks of the
// last launch stay in a device array of the first kPhaseProbeCtas CTAs, read by read_phase_probe
// (launch.h).
#pragma once

#include <cstdint>

namespace fp8dsa::detail::sparse_mla {

// What each of a CTA's slots holds: its SM, then clock64 at entry, once the first tile's S is
// complete (math group 0), after the last pair (math group 0), at math group 0's end (its output
// stores issued), and after the producer issued its last tile.
enum PhaseMark : int { kMarkSmid, kMarkEntry, kMarkFirstScore, kMarkLoopEnd, kMarkEnd, kMarkProducerEnd, kNumMarks };
constexpr int kPhaseProbeCtas = 16384;

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
#else
#define FP8DSA_PHASE_MARK(condition, mark) \
  do {                                     \
  } while (0)
#endif

}  // namespace fp8dsa::detail::sparse_mla
