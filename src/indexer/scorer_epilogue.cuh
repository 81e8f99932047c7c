// The score epilogue shared by both tensor-core scorers. Both compute S^T = K . Q^T: a warpgroup's
// accumulator tile is [64 keys][kCols (token, head) columns], columns token-major (col = t*H + h).
//
// Per accumulator: relu, times w[t, h], summed over the heads of each token. For H >= 8 the 8
// columns of an accumulator group belong to one token, so a thread sums H/4 heads of every token
// in registers and the 4 lanes of a quad finish the sum. For H = 4 one 8-column group holds two
// tokens (lanes 0-1 of the quad the first, lanes 2-3 the second), so only lane pairs reduce.
// The cross-lane sums are "transposed": each shuffle step halves the values a lane holds, so the
// quad ends with every lane owning distinct finished (token, key) sums to store.
#pragma once

#include <cstdint>

#include "hopper/wgmma.cuh"

namespace fp8dsa::detail::indexer {

template <int kHeads, int kCols>
struct ScoreEpilogue {
  static_assert(kHeads == 4 || kHeads == 8 || kHeads == 16 || kHeads == 32 || kHeads == 64,
                "SPEC: H in {4, 8, 16, 32, 64}");
  static_assert(kCols % kHeads == 0 && kCols % 8 == 0 && kCols <= 256, "wgmma N is a multiple of 8, <= 256");
  static constexpr int kTokens = kCols / kHeads;      // tokens in one B operand block
  static constexpr bool kPairTokens = kHeads == 4;    // two tokens per 8-column group
  static constexpr int kAccRegs = kCols / 2;          // m64nN f32 accumulators per thread
  static constexpr int kWeightRegs = kCols / 4;       // distinct columns a thread holds
  // Partial sums a thread keeps: (its tokens) x (row halves r and r+8).
  static constexpr int kParts = kPairTokens ? kTokens : 2 * kTokens;
  static_assert(kParts >= 2, "a thread holds at least two partial sums");
  // 8-column groups that feed one partial: H / 8 for H >= 8 (one for H = 4).
  static constexpr int kGroupsPerPart = kPairTokens ? 1 : kHeads / 8;
  static constexpr int kSubWanted = kParts >= 16 ? 1 : 16 / kParts;
  static constexpr int kSub = kSubWanted < kGroupsPerPart ? kSubWanted : kGroupsPerPart;
  // Transposed shuffle steps: mask 1 always; mask 2 only when H >= 8 (and there is still a pair to
  // split; otherwise an all-reduce plus an owner lane).
  static constexpr int kAfterStep1 = kParts / 2;
  static constexpr bool kStep2Transposed = !kPairTokens && kAfterStep1 >= 2;
  static constexpr int kFinal = kStep2Transposed ? kAfterStep1 / 2 : kAfterStep1;

  // Column of accumulator register r for this lane (hopper::acc_col).
  __device__ __forceinline__ static constexpr int col_of(int lane, int r) { return hopper::acc_col(lane, r); }

  // Which partial sum register r feeds (compile-time for an unrolled r).
  __device__ __forceinline__ static constexpr int part_of(int r) {
    const int group = r / 4;  // 8-column group
    const int row_half = (r / 2) % 2;
    const int local_token = kPairTokens ? group : (group * 8) / kHeads;
    return local_token * 2 + row_half;
  }

  // w for this lane's columns: slot s <-> registers r with (r/4)*2 + r%2 == s.
  //
  // At H = 64 a token's 16 slots are loaded under one test of the token (slots s of token s / 16):
  // with a test a slot, the 64 loads ran one after another at the start of every CTA (ncu source
  // counters: 12% of the warp stalls at N = 1024), and the scorer at T = 4096, N = 8K ran 4% slower. At
  // H <= 32 the per-token grouping measured 2-5% slower (bench/journal/2026-12-04.md, twenty-first
  // session), so the slot-wise loads stay there.
  __device__ __forceinline__ static void load_weights(float (&w_reg)[kWeightRegs], const float* w,
                                                      int64_t w_stride, int64_t first_token,
                                                      int64_t num_tokens, int lane) {
    if constexpr (kHeads == 64) {
      constexpr int kSlotsPerToken = kWeightRegs / kTokens;  // H / 4
#pragma unroll
      for (int token = 0; token < kTokens; ++token) {
        const int64_t t = first_token + token;
        if (t < num_tokens) {
          const float* row = w + t * w_stride;
#pragma unroll
          for (int j = 0; j < kSlotsPerToken; ++j) {
            const int s = token * kSlotsPerToken + j;
            const int col = (s / 2) * 8 + (lane % 4) * 2 + s % 2;  // inside this token's 64 columns
            w_reg[s] = row[col % kHeads];
          }
        } else {
#pragma unroll
          for (int j = 0; j < kSlotsPerToken; ++j) w_reg[token * kSlotsPerToken + j] = 0.0f;
        }
      }
    } else {
#pragma unroll
      for (int s = 0; s < kWeightRegs; ++s) {
        const int col = (s / 2) * 8 + (lane % 4) * 2 + s % 2;
        const int64_t t = first_token + col / kHeads;
        w_reg[s] = t < num_tokens ? w[t * w_stride + col % kHeads] : 0.0f;
      }
    }
  }

  // relu x w summed over heads, then the quad reduction. On return part[0 .. kFinal) hold finished
  // sums; final_index(lane, j) says which (token, row half) slot j is, and owner() whether this
  // lane stores them.
  __device__ __forceinline__ static void reduce(const float (&acc)[kAccRegs],
                                                const float (&w_reg)[kWeightRegs],
                                                float (&part)[kParts], int lane) {
    head_sums<false>(acc, w_reg, part);
    quad_reduce(part, lane);
  }

  // The split epilogue (QResidentConfig::kLinearSplit, linear_split.cuh): w_reg holds w / 2, and
  // sum_h (w / 2) |x| is one FFMA per accumulator. lin is the m64 x (4 kTokens) accumulator of the
  // linear-term rows (column c: token c / 4, term c % 4). Register r of a lane is
  // column (r / 4) 8 + (lane % 4) 2 + r % 2: its token is 2 (r / 4) + (lane % 4) / 2, known only at
  // run time, so the lane adds its two columns of each 8-column group into both candidate partials,
  // weighted by lin_weight[2 j] (sigma / 2 of token 2 j on lanes 0-1 of the quad, else 0) and
  // lin_weight[2 j + 1] (sigma / 2 of token 2 j + 1 on lanes 2-3, else 0; linear_weights()).
  // Then the quad reduction as reduce().
  template <int kLinRegs>
  __device__ __forceinline__ static void reduce_split(const float (&acc)[kAccRegs], const float (&lin)[kLinRegs],
                                                      const float (&w_reg)[kWeightRegs],
                                                      const float (&lin_weight)[kLinRegs / 2],
                                                      float (&part)[kParts], int lane) {
    static_assert(!kPairTokens && kLinRegs == 2 * kTokens, "four linear-term columns per token");
    head_sums<true>(acc, w_reg, part);
#pragma unroll
    for (int j = 0; j < kLinRegs / 4; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float both = lin[4 * j + 2 * half] + lin[4 * j + 2 * half + 1];
        part[(2 * j) * 2 + half] = fmaf(lin_weight[2 * j], both, part[(2 * j) * 2 + half]);
        part[(2 * j + 1) * 2 + half] = fmaf(lin_weight[2 * j + 1], both, part[(2 * j + 1) * 2 + half]);
      }
    }
    quad_reduce(part, lane);
  }

  // lin_weight of reduce_split from the tokens' sigma / 2 (sigma_half[local token]).
  template <int kLinRegs>
  __device__ __forceinline__ static void linear_weights(const float* sigma_half, float (&lin_weight)[kLinRegs / 2],
                                                        int lane) {
    const bool upper = (lane & 2) != 0;
#pragma unroll
    for (int j = 0; j < kLinRegs / 4; ++j) {
      lin_weight[2 * j] = upper ? 0.0f : sigma_half[2 * j];
      lin_weight[2 * j + 1] = upper ? sigma_half[2 * j + 1] : 0.0f;
    }
  }

  // Index (into the pre-reduction partials) of final slot j.
  __host__ __device__ __forceinline__ static constexpr int final_index(int lane, int j) {
    int base = (lane & 1) * kAfterStep1;
    if constexpr (kStep2Transposed) base += ((lane >> 1) & 1) * (kAfterStep1 / 2);
    return base + j;
  }
  __host__ __device__ __forceinline__ static constexpr bool owner(int lane) {
    if constexpr (!kPairTokens && !kStep2Transposed) return (lane & 2) == 0;
    return true;
  }
  // Local token (0 .. kTokens) and row half of a partial index.
  __host__ __device__ __forceinline__ static constexpr int token_of(int lane, int index) {
    return kPairTokens ? 2 * (index >> 1) + ((lane >> 1) & 1) : (index >> 1);
  }
  // Slot j's local token for this lane.
  __host__ __device__ __forceinline__ static constexpr int slot_token(int lane, int j) {
    return token_of(lane, final_index(lane, j));
  }

  // The slots of a lane come in pairs, the two row halves of one token: slots 2m and 2m + 1 hold
  // the same token (kFinal = 1: one slot), and the lanes sharing slot j's token share it for every
  // slot of the pair. fused_topk's candidate store counts a token's cells per pair of slots.
  static constexpr int kSlotsPerToken = kFinal >= 2 ? 2 : 1;
  static constexpr int kTokensPerLane = kFinal / kSlotsPerToken;
  static constexpr bool slots_pair_by_token() {
    if (kFinal % kSlotsPerToken != 0) return false;
    for (int lane = 0; lane < 32; ++lane) {
      for (int j = 0; j < kFinal; ++j) {
        if (slot_token(lane, j) != slot_token(lane, j / kSlotsPerToken * kSlotsPerToken)) return false;
        if ((final_index(lane, j) & 1) != j % kSlotsPerToken && kSlotsPerToken == 2) return false;
        for (int m = 0; m < j / kSlotsPerToken; ++m) {  // a lane's pairs hold distinct tokens
          if (slot_token(lane, m * kSlotsPerToken) == slot_token(lane, j)) return false;
        }
      }
    }
    return true;
  }

 private:
  // part[i] = the lane's sum over its heads of w relu(x) (kAbs: of w |x|) for partial i. kSub
  // independent chains per partial (by 8-column group) keep the FMA latency hidden when there are
  // few partials; they are added in a fixed order, so results stay bitwise stable.
  template <bool kAbs>
  __device__ __forceinline__ static void head_sums(const float (&acc)[kAccRegs], const float (&w_reg)[kWeightRegs],
                                                   float (&part)[kParts]) {
    float sub[kParts][kSub];
#pragma unroll
    for (int i = 0; i < kParts; ++i) {
#pragma unroll
      for (int j = 0; j < kSub; ++j) sub[i][j] = 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kAccRegs; ++r) {
      float& chain = sub[part_of(r)][(r / 4) % kSub];
      chain = fmaf(w_reg[(r / 4) * 2 + r % 2], kAbs ? fabsf(acc[r]) : fmaxf(acc[r], 0.0f), chain);
    }
#pragma unroll
    for (int i = 0; i < kParts; ++i) {
      part[i] = sub[i][0];
#pragma unroll
      for (int j = 1; j < kSub; ++j) part[i] += sub[i][j];
    }
  }

  // The cross-lane sums of the quad, "transposed" (see the top of the file).
  __device__ __forceinline__ static void quad_reduce(float (&part)[kParts], int lane) {
    transposed_step<kParts>(part, 1, (lane & 1) != 0);
    if constexpr (!kPairTokens) {
      if constexpr (kStep2Transposed) {
        transposed_step<kAfterStep1>(part, 2, (lane & 2) != 0);
      } else {
        part[0] += __shfl_xor_sync(0xFFFFFFFFu, part[0], 2);
      }
    }
  }

  // Lanes a and a^mask each hold n values; afterwards lane with `upper` false holds the sums of the
  // lower n/2, the other lane those of the upper n/2, both in slots [0, n/2).
  template <int kN, int kSize>
  __device__ __forceinline__ static void transposed_step(float (&v)[kSize], int mask, bool upper) {
    static_assert(kN % 2 == 0 && kN <= kSize, "transposed step splits an even count");
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) {
      const float send = upper ? v[i] : v[i + kN / 2];
      const float keep = upper ? v[i + kN / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, mask);
    }
  }
};

}  // namespace fp8dsa::detail::indexer
