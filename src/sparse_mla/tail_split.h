// Internal: balancing the last wave of the 64-head kernel. One CTA per (token, 64-head block), one
// CTA per SM, all alike: T * ceil(h / 64) CTAs run in waves of one per SM, and a last wave of R
// CTAs (R = the count mod the SMs) takes as long as a full one while most SMs idle (T = 4096 on 132
// SMs: 32 waves where 31.03 would do at h = 64). The planner splits the last wave's tokens' key
// lists into parts that run side by side (their results merged by lse, lse_merge.h), when its cost
// model says that is faster, and only behind at most kMaxWholeWavesBeforeTail full waves.
//
// Measured on the H200 (bench/journal/2026-12-02.md, third session; fp8dsa_sparse_mla_timing
// tail): with a few waves the split pays (h = 128: T = 1 2.8x, T = 16 1.9x, T = 140 1.19x; h = 64:
// 2.7x, 2.3x, 1.36x). Behind many waves it does not (T = 4096: 2.6% slower at h = 128, 0.3% at
// h = 64; T = 1000, h = 64: 7.5% slower): the CTAs of a long grid no longer end together, so the
// whole last wave already overlaps the previous ones, while the split waits for the whole grid
// before its parts start and adds the merge.
#pragma once

#include <cstdint>

namespace fp8dsa::detail::sparse_mla {

struct TailSplit {
  int64_t main_tokens = 0;  // tokens [0, main_tokens) run whole
  int parts = 1;            // tokens [main_tokens, T) run in this many parts (1: nothing is split)
  int part_keys = 0;        // key positions per part: a multiple of 128 (the kernel's pair of tiles)
};

// The cost model, in key positions of one CTA's time: a wave of CTAs with L positions each costs
// L + kCtaFixedPositions (Q's load, the pipeline's fill, the epilogue), the merge and its launch
// kMergePositions. At topk = 2048 a position is about 23 ns of the H200's 64-head kernel.
inline constexpr int kCtaFixedPositions = 100;
inline constexpr int kMergePositions = 300;
inline constexpr int kMaxTailParts = 16;
inline constexpr int kMaxWholeWavesBeforeTail = 2;

// num_sms: the SMs (one CTA each). forced_parts: 0 for the model's choice; 1 never splits; P > 1
// splits the last wave in P parts (fewer where topk has fewer than P pairs of 64 keys), whatever the
// model says. Deterministic: the same arguments give the same plan.
TailSplit plan_tail_split(int64_t num_tokens, int head_blocks, int topk, int num_sms, int forced_parts = 0);

}  // namespace fp8dsa::detail::sparse_mla
