// Native FP8 sparse MLA prefill for one (token, 64-head block) per CTA: QK^T and P.V both on the
// e4m3 tensor cores (SASS QGMMA). Layout and roles: config.h.
//
// Per pair p of 64-key tiles, consumer w (0/1) owns tile 2p + w:
//   1. S = Q K^T (wgmma SS, m64n64, 18 k-steps in kQkGroups chains added in f32), issued right
//      behind the previous pair's P.V; while the first chain runs, the tile is transposed into
//      V^T[w] (once the other consumer's previous P.V no longer reads it);
//   2. invalid keys -> -inf, row max, exchange of maxima with the other consumer (each owns half of
//      every O row, so both must scale P alike);
//   3. P = 2^6 * exp2(s - m_ref) quantised to e4m3 (m_ref moves, and O is rescaled, only when the
//      max has grown by more than 2 in log2 units); row sums of both the f32 P (-> lse) and the
//      quantised P (-> the normalisation of out, so that the weights sum to 1 exactly);
//   4. P.V on this consumer's 256 d_v columns: own tile with P from registers (RS), the other
//      tile with its P from shared memory (SS).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda/ptx>

#include "core/cuda_check.h"
#include "fp8dsa/status.h"
#include "hopper/cluster.cuh"
#include "hopper/cp_async.cuh"
#include "hopper/mbarrier.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "sparse_mla/config.h"
#include "sparse_mla/gather.cuh"
#include "sparse_mla/softmax.cuh"
#include "sparse_mla/transpose_v.cuh"

namespace fp8dsa::sparse_mla {

// Resolved arguments as the kernel reads them (strides in elements).
struct Fp8KernelParams {
  const uint8_t* q;
  int64_t q_token_stride, q_head_stride;
  const uint8_t* kv;
  int64_t kv_row_stride, num_kv;
  const int32_t* indices;
  int64_t indices_stride;
  int topk;
  const int32_t* topk_length;  // optional
  const float* attn_sink;      // optional
  float score_scale_log2;      // q_scale * kv_scale * sm_scale * log2(e)
  float kv_scale;
  __nv_bfloat16* out;
  int64_t out_token_stride, out_head_stride;
  float* lse;
  float* max_logits;  // optional
  int num_heads;    // h < 64 runs as one 64-head block whose rows >= h are zero (see the launcher)
  int head_blocks;  // ceil(num_heads / 64)
};

namespace detail {

using C = Fp8Config;
using hopper::Swizzle;

__device__ __forceinline__ int token_length(const Fp8KernelParams& p, int64_t token) {
  if (p.topk_length == nullptr) return p.topk;
  return min(max(p.topk_length[token], 0), p.topk);
}

// Tiles go in pairs (one per consumer); the last tile of an odd count is all padding.
__device__ __forceinline__ int pair_count(int length) {
  return (length + 2 * C::kKeysPerTile - 1) / (2 * C::kKeysPerTile);
}

__device__ __forceinline__ bool index_valid(int32_t idx, int64_t num_kv) { return idx >= 0 && idx < num_kv; }

#if defined(FP8DSA_MLA_HANG_CHECK)
// A producer wait this long is a pipeline bug: a CTA's whole key loop takes microseconds (well under
// a second even under compute-sanitizer).
constexpr uint64_t kHangCheckNs = 10'000'000'000ull;

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(ns));
  return ns;
}
#endif

// The producer's mbarrier wait; with FP8DSA_MLA_HANG_CHECK it traps instead of hanging forever (a
// pipeline bug then fails a test with an illegal-instruction error). Producer only, and no printf:
// a trap or call in the consumers makes ptxas serialise every wgmma (C7510 / C7512). The bound is
// time, not a count of tries: one try_wait may suspend the thread for a hardware-chosen while, and
// 2^26 tries did not trap within a 150 s test timeout.
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

// Where the producer puts Q and the K ring (both kernels gather alike).
template <int kQRowsT, uint32_t kQOffsetT, uint32_t kKOffsetT>
struct GatherLayout {
  static constexpr int kQRows = kQRowsT;  // rows of the Q tile (heads; zero past num_heads)
  static constexpr uint32_t kQOffset = kQOffsetT;
  static constexpr uint32_t kKOffset = kKOffsetT;
};
using MainGatherLayout = GatherLayout<C::kHeads, C::kQOffset, C::kKOffset>;

// The barriers of one CTA's pipeline (see CtaPipeline).
struct PipelineBarriers {
  uint64_t* full;      // [kNumKStages] K tile in shared memory
  uint64_t* empty;     // [kNumKStages] the consumers (of both CTAs of a cluster) are done with it
  uint64_t* q_full;    // Q gathered
  uint64_t* released;  // [kNumKStages] cluster only: this CTA's consumer is done with it
};

// A 2-CTA cluster (h = 128, HeadPairs::kCluster) splits every K tile: CTA rank r gathers rows
// [32r, 32r + 32) with cp.async, and each producer warp, once its 8 rows have landed, copies them
// into the peer's ring with one bulk copy per 64-byte column atom (a warp's rows are contiguous
// there: 9 x 512 bytes), completing on the peer's full barrier. Each row then crosses L2 -> SM once
// instead of twice, at the price of a shared-memory read of the half being sent. A producer gathers
// into its own stage once its own consumer has released it (`released`), and reports that release
// to both CTAs' `empty`, off the consumers' path; it copies to the peer once `empty` shows that both
// consumers are done.
constexpr int kClusterHalfRows = Fp8Config::kKeysPerTile / 2;
constexpr uint32_t kClusterHalfAtomBytes = kClusterHalfRows * Fp8Config::kSwizzleBytes;
constexpr uint32_t kClusterHalfTileBytes = Fp8Config::kKTileBytes / 2;
constexpr int kClusterRowsPerWarp = kGatherRowsPerPass / 4;
static_assert(kClusterHalfRows == kGatherRowsPerPass, "a cluster CTA gathers one pass of rows per tile");

// The producer warpgroup: Q of the CTA's heads, then every K tile of the token into the ring (with
// kCluster = 2, its half of every tile, which it also sends to the peer CTA).
template <class L = MainGatherLayout, int kCluster = 1>
__device__ __forceinline__ void producer(const Fp8KernelParams& p, uint32_t smem, const PipelineBarriers& bars,
                                         int64_t token, int head_block, int length, int num_tiles, int thread) {
  uint64_t *full = bars.full, *empty = bars.empty;
  const uint32_t rank = kCluster == 2 ? hopper::cluster_ctarank() : 0u;
  const int quarter = thread % kGatherThreadsPerRow;
  const int row_in_pass = thread / kGatherThreadsPerRow;
  const uint8_t* q = p.q + token * p.q_token_stride + int64_t{head_block} * L::kQRows * p.q_head_stride;
#pragma unroll
  for (int pass = 0; pass < (L::kQRows + kGatherRowsPerPass - 1) / kGatherRowsPerPass; ++pass) {
    const int row = pass * kGatherRowsPerPass + row_in_pass;
    if (row < L::kQRows) {
      const bool head_exists = head_block * L::kQRows + row < p.num_heads;  // else zero rows
      gather_row<L::kQRows>(smem + L::kQOffset, row, head_exists ? q + row * p.q_head_stride : p.q, head_exists,
                            quarter);
    }
  }
  hopper::cp_async_mbarrier_arrive_noinc(bars.q_full);

  const int32_t* indices = p.indices + token * p.indices_stride;
  constexpr int kPasses = kCluster == 2 ? 1 : C::kKeysPerTile / kGatherRowsPerPass;
  const int first_pass = kCluster == 2 ? static_cast<int>(rank) : 0;
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile % C::kNumKStages;
    int32_t idx[kPasses];
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int pos = tile * C::kKeysPerTile + (first_pass + pass) * kGatherRowsPerPass + row_in_pass;
      idx[pass] = pos < length ? __ldg(indices + pos) : -1;
    }
    const uint32_t parity = ((tile / C::kNumKStages) - 1) & 1;
    if (tile >= C::kNumKStages) {
      if constexpr (kCluster == 2) {
        // The own half may overwrite the stage once the own consumer is done with it; the copy to
        // the peer waits for the peer's consumer below.
        wait_barrier(&bars.released[stage], parity);
        if (thread == 0) {
          hopper::mbarrier_arrive(&empty[stage]);
          hopper::mbarrier_arrive_cluster(hopper::peer_address(hopper::smem_address(&empty[stage]), rank ^ 1u));
        }
      } else {
        wait_barrier(&empty[stage], parity);
      }
    }
    const uint32_t k_tile = smem + L::kKOffset + stage * C::kKTileBytes;
    // The peer's half arrives as transaction bytes on full[stage] (possibly before this arrival:
    // the transaction count may go negative within a phase).
    if (kCluster == 2 && thread == 0) hopper::mbarrier_arrive_expect_tx(&full[stage], kClusterHalfTileBytes);
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const bool valid = index_valid(idx[pass], p.num_kv);
      const uint8_t* src = p.kv + (valid ? int64_t{idx[pass]} * p.kv_row_stride : 0);
      gather_row(k_tile, (first_pass + pass) * kGatherRowsPerPass + row_in_pass, src, valid, quarter);
    }
    hopper::cp_async_mbarrier_arrive_noinc(&full[stage]);
    if constexpr (kCluster == 2) {
      // This warp's rows to the peer, once they have landed and the peer's stage is free.
      hopper::cp_async_commit_group();
      hopper::cp_async_wait_group<0>();
      if (tile >= C::kNumKStages) wait_barrier(&empty[stage], parity);
      __syncwarp();
      if (thread % 32 == 0) {
        hopper::fence_proxy_async_smem();  // cp.async wrote the rows; the bulk copy reads them
        const uint32_t peer = rank ^ 1u;
        const uint32_t peer_full = hopper::peer_address(hopper::smem_address(&full[stage]), peer);
        const int first_row = static_cast<int>(rank) * kClusterHalfRows + (thread / 32) * kClusterRowsPerWarp;
        const uint32_t rows = k_tile + first_row * C::kSwizzleBytes;
#pragma unroll
        for (int atom = 0; atom < C::kDqk / static_cast<int>(C::kSwizzleBytes); ++atom) {
          const uint32_t src = rows + atom * C::kKeysPerTile * C::kSwizzleBytes;
          hopper::bulk_copy_shared_to_cluster(hopper::peer_address(src, peer), src,
                                              kClusterRowsPerWarp * C::kSwizzleBytes, peer_full);
        }
      }
      __syncwarp();
    }
  }
  // No copy may outlive the thread that issued it.
  hopper::cp_async_commit_group();
  hopper::cp_async_wait_group<0>();
#if defined(FP8DSA_MLA_HANG_CHECK)
  // Waits for the consumers to release the last tiles too, so that a consumer stuck anywhere before
  // its last release traps here instead of hanging unreported behind an exited producer. Tile t is
  // release number t / kNumKStages of its stage; the one before it was waited for above.
  for (int tile = max(num_tiles - C::kNumKStages, 0); tile < num_tiles; ++tile) {
    wait_barrier(&(kCluster == 2 ? bars.released : empty)[tile % C::kNumKStages], (tile / C::kNumKStages) & 1);
  }
#endif
}

// Byte offset of K step ks (32 bytes) in a K-major SW64 tile of `rows` rows: the same for the
// descriptor start address as kmajor_descriptor computes, so descriptors are built once and
// advanced by constants (recomputing them cost ~25 instructions per wgmma).
__host__ __device__ constexpr uint32_t kstep_offset(int rows, int ks) {
  return static_cast<uint32_t>((ks * 32 / 64) * rows * 64 + (ks * 32) % 64);
}

// The score GEMM's shape: A (M = 64 rows) times B (kN rows), both K-major SW64 tiles 576 bytes
// deep. The h >= 64 kernel has A = Q (64 heads) and B = the K tile (64 keys); the small-head kernel
// the transposed orientation, A = the K tile and B = Q (kN = h heads).
template <int kNT, int kRowsAT>
struct ScoreShape {
  static constexpr int kN = kNT, kRowsA = kRowsAT, kRowsB = kNT, kAccRegs = kNT / 2;
};
using MainScoreShape = ScoreShape<C::kKeysPerTile, C::kHeads>;

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

// Score groups kGroup..kGroups-1: each chain runs into the partial accumulator, which is added to s
// in f32 (a compile-time loop, so the k-step offsets stay immediates). One partial accumulator
// serves every group: separate arrays become separate wgmma register blocks and spill.
template <class S, int kGroup, int kGroups, int kStepsPerGroup>
__device__ __forceinline__ void add_qk_groups(float (&s)[S::kAccRegs], float (&part)[S::kAccRegs], uint64_t desc_a,
                                              uint64_t desc_b) {
  if constexpr (kGroup < kGroups) {
    hopper::wgmma_fence_operands(part);
    hopper::wgmma_fence();
    issue_qk<S, kGroup * kStepsPerGroup, kStepsPerGroup>(part, desc_a, desc_b);
    hopper::wgmma_commit_group();
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(part);
#pragma unroll
    for (int r = 0; r < S::kAccRegs; ++r) s[r] += part[r];
    add_qk_groups<S, kGroup + 1, kGroups, kStepsPerGroup>(s, part, desc_a, desc_b);
  }
}

// kCluster = 2: the K tiles are shared with the peer CTA (the other rank of the cluster), whose
// producer writes into this CTA's ring; releases go to the own producer, which passes them on.
template <int kQkGroups, int kCluster = 1>
__device__ __forceinline__ void consumer(const Fp8KernelParams& p, uint32_t smem, uint8_t* smem_ptr,
                                         const PipelineBarriers& bars, int64_t token, int head_block, int length,
                                         int num_pairs, int w, int thread) {
  uint64_t *full = bars.full, *empty = bars.empty;
  constexpr uint32_t kConsumerThreads = 128 * C::kNumConsumers;
  const int warp = thread / 32, lane = thread % 32;
  const int row_lo = warp * 16 + lane / 4;  // the thread's two rows (heads): row_lo, row_lo + 8
  const uint32_t q_smem = smem + C::kQOffset;
  const uint32_t vt_own = smem + C::kVtOffset + w * C::kVtTileBytes;
  const uint32_t vt_other = smem + C::kVtOffset + (1 - w) * C::kVtTileBytes;
  const uint32_t p_own = smem + C::kPOffset + w * C::kPTileBytes;
  const uint32_t p_other = smem + C::kPOffset + (1 - w) * C::kPTileBytes;
  float* row_max_buf = reinterpret_cast<float*>(smem_ptr + C::kRowMaxOffset);
  float* row_sum_buf = reinterpret_cast<float*>(smem_ptr + C::kRowSumOffset);
  const int32_t* indices = p.indices + token * p.indices_stride;
  const float scale_log2 = p.score_scale_log2;
  const uint64_t desc_q = hopper::kmajor_descriptor(q_smem, Swizzle::k64B, C::kHeads, 0);
  const uint32_t v_rows = w * C::kDvPerConsumer * C::kKeysPerTile;  // this consumer's d_v half of V^T

  float o[C::kDvPerConsumer / 2];
#pragma unroll
  for (int i = 0; i < C::kDvPerConsumer / 2; ++i) o[i] = 0.0f;
  float m_true[2] = {-INFINITY, -INFINITY};  // running max of the scaled (log2) scores
  float m_ref[2] = {-INFINITY, -INFINITY};   // the max P is taken against (lags m_true, see below)
  float sum_f32[2] = {0.0f, 0.0f};          // this thread's part of sum(P) in f32 (-> lse)
  float sum_e4m3[2] = {0.0f, 0.0f};         // ... and of the quantised P that multiplies V (-> out)
  uint32_t pf[2][4] = {};                   // P as the A fragments of the own tile's P.V

  // The indices of a tile are loaded during the previous pair: their latency must not sit between
  // the previous P.V and the next QK^T.
  int32_t next_idx0 = -1, next_idx1 = -1;
  const auto load_indices = [&](int tile) {
    const int pos = tile * C::kKeysPerTile + 2 * lane;
    next_idx0 = pos < length ? __ldg(indices + pos) : -1;
    next_idx1 = pos + 1 < length ? __ldg(indices + pos + 1) : -1;
  };
  load_indices(w);

  // QK^T of a tile in two halves, so that the next tile's first QK^T group can be issued right
  // behind the P.V of the current pair and the tensor cores never wait for the loop overhead.
  // The e4m3 wgmma accumulates in reduced precision (about 13 mantissa bits, truncating), so the
  // 18 k-steps run as kQkGroups chains whose results are added in f32 registers.
  constexpr int kKSteps = C::kDqk / 32;
  constexpr int kStepsPerGroup = kKSteps / kQkGroups;
  static_assert(kKSteps % kQkGroups == 0, "QK^T groups split the 18 k-steps evenly");
  float s[32];
  uint32_t valid_even = 0, valid_odd = 0;  // bit l: key 2l / 2l + 1 of the tile is valid
  uint32_t k_tile = 0;
  uint64_t desc_k = 0;
  int stage = 0;
  // Starts: key-validity ballots, wait for the gathered rows, issue the first group into s.
  const auto start_scores = [&](int tile) {
    valid_even = __ballot_sync(0xffffffffu, index_valid(next_idx0, p.num_kv));
    valid_odd = __ballot_sync(0xffffffffu, index_valid(next_idx1, p.num_kv));
    stage = tile % C::kNumKStages;
    k_tile = smem + C::kKOffset + stage * C::kKTileBytes;
    hopper::mbarrier_wait(&full[stage], (tile / C::kNumKStages) & 1);
    // The tile was written by cp.async (generic proxy); wgmma reads through the async proxy.
    hopper::fence_proxy_async_smem();
    desc_k = hopper::kmajor_descriptor(k_tile, Swizzle::k64B, C::kKeysPerTile, 0);
    // Register fences keep ordinary accumulator accesses on their side of wgmma.fence: one that
    // sinks past it makes ptxas serialise every wgmma (C7514 / C7515).
    hopper::wgmma_fence_operands(s);
    hopper::wgmma_fence();
    issue_qk<MainScoreShape, 0, kStepsPerGroup>(s, desc_q, desc_k);
    hopper::wgmma_commit_group();
  };
  // Finishes (called once this consumer's previous P.V is complete): V^T of the tile while the
  // first group runs, the other groups, and the K stage goes back to the producer. (Splitting the
  // transpose across the groups, to hide their wgmma latency, spilled and measured 4% slower.)
  const auto finish_scores = [&]() {
    // The other consumer's P.V of the previous pair reads V^T and P of both consumers.
    hopper::named_barrier_sync(kBarrierBuffersFree, kConsumerThreads);
    transpose_v(k_tile, vt_own, thread);
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(s);
    // The later groups use one partial accumulator, after the transpose: its temporaries and a
    // second accumulator do not fit in the registers beside O at the same time.
    if constexpr (kQkGroups > 1) {
      float part[32];
      add_qk_groups<MainScoreShape, 1, kQkGroups, kStepsPerGroup>(s, part, desc_q, desc_k);
    }
    hopper::fence_proxy_async_smem();        // the V^T stores, for the P.V wgmmas of both consumers
    // wgmma and the transpose are done with the K tile (in a cluster, the producer passes it on)
    hopper::mbarrier_arrive(kCluster == 2 ? &bars.released[stage] : &empty[stage]);
  };

  hopper::mbarrier_wait(bars.q_full, 0);
  if (num_pairs > 0) {
    start_scores(w);
    finish_scores();
  }
  // Softmax of the scores in s, then P.V for both tiles of the pair (committed, not waited for).
  const auto softmax_and_pv = [&](int tile) {
    float tile_max[2] = {-INFINITY, -INFINITY};
    if ((valid_even & valid_odd) != 0xffffffffu) {  // warp-uniform; most tiles are all valid
      const uint32_t even = valid_even >> (lane % 4), odd = valid_odd >> (lane % 4);
#pragma unroll
      for (int r = 0; r < 32; ++r) {
        // register r is key 2 * ((r / 4) * 4 + lane % 4) + r % 2
        if ((((r % 2) ? odd : even) >> ((r / 4) * 4) & 1u) == 0) s[r] = -INFINITY;
      }
    }
#pragma unroll
    for (int r = 0; r < 32; ++r) tile_max[(r / 2) % 2] = fmaxf(tile_max[(r / 2) % 2], s[r]);
    load_indices(tile + 2);  // after the QK^T phase, where registers are scarcest
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = quad_max(tile_max[h]) * scale_log2;
      if (lane % 4 == 0) row_max_buf[w * C::kHeads + row_lo + 8 * h] = tile_max[h];
    }
    hopper::named_barrier_sync(kBarrierRowMax, kConsumerThreads);
    // P = 2^kPBiasLog2 * exp2(s - m_ref). m_ref moves only when the max has grown by more than
    // kLazyRescaleLog2 since it was set, so O is rescaled rarely and P stays <= 2^8 < 448. Both
    // consumers see the same maxima and make the same choice.
    float alpha[2], bias[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float other = row_max_buf[(1 - w) * C::kHeads + row_lo + 8 * h];
      m_true[h] = fmaxf(m_true[h], fmaxf(tile_max[h], other));
      alpha[h] = 1.0f;
      if (m_true[h] > m_ref[h] + C::kLazyRescaleLog2) {  // false while every key so far is invalid
        alpha[h] = fast_exp2(m_ref[h] - m_true[h]);       // 0 the first time (m_ref = -inf)
        m_ref[h] = m_true[h];
      }
      bias[h] = m_ref[h] == -INFINITY ? 0.0f : C::kPBiasLog2 - m_ref[h];
    }
#pragma unroll
    for (int r = 0; r < 32; ++r) s[r] = fast_exp2(fmaf(s[r], scale_log2, bias[(r / 2) % 2]));
    float part_f32[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 32; ++r) part_f32[(r / 2) % 2] += s[r];
    p_fragment(pf[0], s, 0);
    p_fragment(pf[1], s, 1);
    __half2 part_e4m3[2] = {__float2half2_rn(0.0f), __float2half2_rn(0.0f)};
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        part_e4m3[j % 2] = __hadd2(part_e4m3[j % 2], e4m3x2_to_half2(pf[ks][j] & 0xffffu));
        part_e4m3[j % 2] = __hadd2(part_e4m3[j % 2], e4m3x2_to_half2(pf[ks][j] >> 16));
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 q2 = __half22float2(part_e4m3[h]);
      sum_f32[h] = sum_f32[h] * alpha[h] + part_f32[h];
      sum_e4m3[h] = sum_e4m3[h] * alpha[h] + (q2.x + q2.y);
    }
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int i = 0; i < C::kDvPerConsumer / 2; ++i) o[i] *= alpha[(i / 2) % 2];
    }

    // The own P to shared memory for the other consumer, K-major with the same key permutation.
    // Row a_frag_row, K byte 32ks + a_frag_k = 16c + 4t with chunk c = 2ks + j/2, swizzled with
    // (row/2)%4 = lane/8 for both rows of the thread; row + 8 (odd j) is 512 bytes further.
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = 2 * ks + j / 2;
        sts32(p_own + row_lo * 64 + ((c ^ (lane / 8)) << 4) + 4 * (lane % 4) + 512 * (j % 2), pf[ks][j]);
      }
    hopper::fence_proxy_async_smem();

    const uint64_t desc_vt_own = hopper::kmajor_descriptor(vt_own + v_rows, Swizzle::k64B, C::kDvPerConsumer, 0);
    const uint64_t desc_vt_other =
        hopper::kmajor_descriptor(vt_other + v_rows, Swizzle::k64B, C::kDvPerConsumer, 0);
    const uint64_t desc_p_other = hopper::kmajor_descriptor(p_other, Swizzle::k64B, C::kHeads, 0);
    hopper::wgmma_fence_operands(o);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) hopper::wgmma_fence_operand(pf[ks][j]);
    hopper::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      hopper::WgmmaE4m3<C::kDvPerConsumer>::rs(o, pf[ks], hopper::advance_descriptor(desc_vt_own, 32 * ks), true);
    }
    hopper::named_barrier_sync(kBarrierPReady, kConsumerThreads);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      hopper::WgmmaE4m3<C::kDvPerConsumer>::ss(o, hopper::advance_descriptor(desc_p_other, 32 * ks),
                                               hopper::advance_descriptor(desc_vt_other, 32 * ks), true);
    }
    hopper::wgmma_commit_group();
  };

  // The last pair is peeled: with a branch choosing between wait_group 1 and 0, ptxas loses track
  // of the groups in flight and serialises every wgmma (C7514 / C7518). The loop leaves `tile` at the
  // last pair's tile, so that num_pairs is not live across the loop (ptxas spilled it there).
  const int last_tile = 2 * (num_pairs - 1) + w;
  int tile = w;
  for (; tile < last_tile; tile += 2) {
    softmax_and_pv(tile);
    // The next tile's QK^T goes right behind this P.V; nothing stays in flight across the loop
    // edge (an accumulator in flight there also serialises all wgmmas).
    start_scores(tile + 2);
    hopper::wgmma_wait_group<1>();
    hopper::wgmma_fence_operands(o);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) hopper::wgmma_fence_operand(pf[ks][j]);
    finish_scores();
  }
  if (num_pairs > 0) {
    softmax_and_pv(tile);
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(o);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) hopper::wgmma_fence_operand(pf[ks][j]);
  }

  // Row sums: quad, then the two consumers (each summed its own tiles); f32 and e4m3 sums travel
  // together as a float2 per row.
  float2* row_sums = reinterpret_cast<float2*>(row_sum_buf);
  float total_f32[2], total_e4m3[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum_f32[h] = quad_sum(sum_f32[h]);
    sum_e4m3[h] = quad_sum(sum_e4m3[h]);
    if (lane % 4 == 0) row_sums[w * C::kHeads + row_lo + 8 * h] = make_float2(sum_f32[h], sum_e4m3[h]);
  }
  hopper::named_barrier_sync(kBarrierRowSum, kConsumerThreads);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float2 other = row_sums[(1 - w) * C::kHeads + row_lo + 8 * h];
    total_f32[h] = sum_f32[h] + other.x;
    total_e4m3[h] = sum_e4m3[h] + other.y;
  }

  // In a cluster, the K ring is reused below only once the peer has received every half this CTA
  // sent (it has consumed all its tiles), and no peer copy or arrival is in flight when either exits.
  if constexpr (kCluster == 2) {
    hopper::cluster_sync();
    // Read again rather than kept: held across the key loop beside the cluster's release
    // addresses, the token got spilled.
    token = hopper::block_index_x() / p.head_blocks;
    head_block = static_cast<int>(hopper::block_index_x() % p.head_blocks);
  }

  constexpr float kLn2 = 0.6931471805599453f;
  float out_scale[2];
  const int64_t head0 = int64_t{head_block} * C::kHeads;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t head = head0 + row_lo + 8 * h;
    const bool head_exists = head < p.num_heads;
    const bool any_valid = total_f32[h] > 0.0f;
    const float lse = any_valid ? (m_ref[h] + log2f(total_f32[h]) - C::kPBiasLog2) * kLn2 : INFINITY;
    float sink_factor = 1.0f;
    if (p.attn_sink != nullptr && any_valid && head_exists) {
      sink_factor = 1.0f / (1.0f + expf(p.attn_sink[head] - lse));
    }
    out_scale[h] = any_valid ? p.kv_scale * sink_factor / total_e4m3[h] : 0.0f;
    if (w == 0 && lane % 4 == 0 && head_exists) {
      const int64_t cell = token * p.num_heads + head;
      p.lse[cell] = lse;
      if (p.max_logits != nullptr) p.max_logits[cell] = any_valid ? m_true[h] * kLn2 : -INFINITY;
    }
  }
  // O goes out through shared memory: straight from the accumulators, a warp's 4-byte stores would
  // fill half of each 32-byte sector (the stores then held the consumers for about a tenth of their
  // time in a profile). Each warp stages its own 16 rows (heads) in the K ring, which no one reads
  // any more once both consumers have passed the row-sum barrier, then writes every row as 32 lanes
  // x 16 contiguous bytes. The 16-byte row padding spreads a warp's 4-byte stores over all banks.
  constexpr uint32_t kStageRowBytes = C::kDvPerConsumer * 2 + 16;
  static_assert(C::kNumConsumers * C::kHeads * kStageRowBytes <= C::kNumKStages * C::kKTileBytes,
                "both consumers' output staging fits in the K ring");
  const uint32_t stage_base = smem + C::kKOffset + w * C::kHeads * kStageRowBytes;
#pragma unroll
  for (int r = 0; r < C::kDvPerConsumer / 2; r += 2) {
    const int row = hopper::acc_row(warp, lane, r);
    const int col = hopper::acc_col(lane, r);
    const float f = out_scale[(r / 2) % 2];
    const __nv_bfloat162 v = __floats2bfloat162_rn(o[r] * f, o[r + 1] * f);
    sts32(stage_base + row * kStageRowBytes + col * 2, *reinterpret_cast<const uint32_t*>(&v));
  }
  __syncwarp();
  __nv_bfloat16* out = p.out + token * p.out_token_stride + head0 * p.out_head_stride + w * C::kDvPerConsumer;
  static_assert(C::kDvPerConsumer * 2 == 32 * 16, "a warp writes one row half per instruction");
#pragma unroll 4
  for (int i = 0; i < 16; ++i) {
    const int row = warp * 16 + i;
    if (head0 + row >= p.num_heads) break;  // h < 64 (warp-uniform)
    uint32_t v[4];
    lds128(v, stage_base + row * kStageRowBytes + lane * 16);
    *reinterpret_cast<uint4*>(out + row * p.out_head_stride + lane * 8) = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// The shared memory of a CTA of either kernel: the dynamic base aligned to 1024 bytes (wgmma
// descriptors assume every tile starts on a swizzle-pattern boundary) and the pipeline's mbarriers
// at barrier_offset, initialised (all threads call this; it ends with __syncthreads, or with a
// cluster barrier when the peer CTA of a kCluster = 2 pair will use them).
struct CtaPipeline {
  uint32_t smem;      // shared address of the aligned base
  uint8_t* smem_ptr;  // the same, generic
  PipelineBarriers bars;
};

template <int kCluster = 1>
__device__ __forceinline__ CtaPipeline setup_cta_pipeline(uint8_t* smem_raw, uint32_t barrier_offset) {
  CtaPipeline c;
  const uint32_t raw = hopper::smem_address(smem_raw);
  c.smem = (raw + 1023u) & ~1023u;
  c.smem_ptr = smem_raw + (c.smem - raw);
  PipelineBarriers& b = c.bars;
  b.full = reinterpret_cast<uint64_t*>(c.smem_ptr + barrier_offset);
  b.empty = b.full + C::kNumKStages;
  b.q_full = b.empty + C::kNumKStages;
  b.released = b.q_full + 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kNumKStages; ++s) {
      // full: one cp.async arrival per producer thread (+ the expect_tx arrival for the peer's half);
      // empty: the owning consumer's threads, or in a cluster one arrival from each CTA's producer.
      hopper::mbarrier_init(&b.full[s], kCluster == 2 ? 129 : 128);
      hopper::mbarrier_init(&b.empty[s], kCluster == 2 ? 2 : 128);
      hopper::mbarrier_init(&b.released[s], 128);
    }
    hopper::mbarrier_init(b.q_full, 128);
    hopper::mbarrier_init_fence();
  }
  if constexpr (kCluster == 2) {
    hopper::cluster_sync();
  } else {
    __syncthreads();
  }
  return c;
}

}  // namespace detail

// kCluster = 2 (h a multiple of 128): launched as clusters of two CTAs, the two 64-head blocks of
// one token (head blocks 2j and 2j + 1), sharing every gathered K tile.
template <int kQkGroups, int kCluster = 1>
__global__ void __launch_bounds__(Fp8Config::kThreads, 1) sparse_mla_fp8_kernel(const Fp8KernelParams p) {
  using C = Fp8Config;
  static_assert(kCluster == 1 || kCluster == 2, "CTAs alone or in pairs");
  extern __shared__ uint8_t smem_raw[];
  const detail::CtaPipeline cta = detail::setup_cta_pipeline<kCluster>(smem_raw, C::kBarrierOffset);

  // The cluster kernel's roles read the block index after their setmaxnreg (a volatile read, which
  // ptxas cannot hoist above it): the token computed before it got spilled there. The single-CTA
  // kernel computes it once up front (per role, it spilled).
  const auto token = [&] {
    return static_cast<int64_t>((kCluster == 1 ? blockIdx.x : hopper::block_index_x()) / p.head_blocks);
  };
  const auto head_block = [&] {
    return static_cast<int>((kCluster == 1 ? blockIdx.x : hopper::block_index_x()) % p.head_blocks);
  };
  [[maybe_unused]] const int64_t cta_token = token();
  [[maybe_unused]] const int cta_head_block = head_block();
  const auto role_token = [&] { return kCluster == 1 ? cta_token : token(); };
  const auto role_head_block = [&] { return kCluster == 1 ? cta_head_block : head_block(); };
  const int wg = threadIdx.x / 128;
  const int thread = threadIdx.x % 128;
  // Each role reads the token's length itself: a value live across setmaxnreg got spilled.
  if (wg == 0) {
    hopper::warpgroup_reg_dealloc<C::kProducerRegs>();
    const int64_t t = role_token();
    const int length = detail::token_length(p, t);
    detail::producer<detail::MainGatherLayout, kCluster>(p, cta.smem, cta.bars, t, role_head_block(), length,
                                                         2 * detail::pair_count(length), thread);
    if constexpr (kCluster == 2) hopper::cluster_sync();  // the consumers' barrier before the epilogue
  } else {
    hopper::warpgroup_reg_alloc<C::kConsumerRegs>();
    const int64_t t = role_token();
    const int length = detail::token_length(p, t);
    detail::consumer<kQkGroups, kCluster>(p, cta.smem, cta.smem_ptr, cta.bars, t, role_head_block(), length,
                                          detail::pair_count(length), wg - 1, thread);
  }
}

// Sets the shared-memory limit and launches a kernel of the producer + two consumers shape (384
// threads, the setmaxnreg split of config.h).
// cluster_size > 1 launches clusters of that many consecutive CTAs (blocks must be a multiple).
inline Status launch_warp_specialised(void (*kernel)(Fp8KernelParams), uint32_t smem_bytes, const char* name,
                                      const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream,
                                      unsigned cluster_size = 1) {
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  // The setmaxnreg split is sized for the registers the CTA starts with (config.h); if ptxas ever
  // gives the kernel fewer, a consumer's setmaxnreg.inc would wait forever: refuse to launch.
  cudaFuncAttributes attributes{};
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attributes, kernel));
  if (attributes.numRegs * Fp8Config::kThreads <
      Fp8Config::kProducerRegs * 128 + Fp8Config::kConsumerRegs * 128 * Fp8Config::kNumConsumers) {
    return not_implemented(std::string(name) + ": built with " + std::to_string(attributes.numRegs) +
                           " registers per thread, too few for its setmaxnreg split (needs " +
                           std::to_string(Fp8Config::kEntryRegs) + ")");
  }
  if (cluster_size == 1) {
    kernel<<<blocks, Fp8Config::kThreads, smem_bytes, stream>>>(params);
  } else {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(Fp8Config::kThreads);
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = cluster_size;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    FP8DSA_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, kernel, params));
  }
  FP8DSA_RETURN_IF_LAUNCH_FAILED(name);
  return Status::ok();
}

// Launches one instantiation (each lives in its own launch_*.cu).
template <int kQkGroups, int kCluster = 1>
Status launch_fp8_kernel(const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream) {
  return launch_warp_specialised(sparse_mla_fp8_kernel<kQkGroups, kCluster>, Fp8Config::kSmemAlloc,
                                 kCluster == 1 ? "sparse_mla_fp8_kernel" : "sparse_mla_fp8_kernel (2-CTA cluster)",
                                 params, blocks, stream, kCluster);
}

}  // namespace fp8dsa::sparse_mla
