// Internal: the tensor-core indexer scorers and their launch knobs. indexer.cpp dispatches here;
// the timing driver (bench/tuning/indexer_timing.cu) calls these directly to compare variants.
#pragma once

#include <cstdint>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"

namespace fp8dsa::detail::indexer {

// Device-side arguments shared by the scorers (strides resolved, in elements).
struct ScorerArgs {
  int64_t num_tokens = 0;
  int64_t num_keys = 0;
  const float* w = nullptr;
  int64_t w_stride = 0;
  const float* k_scale = nullptr;
  const int32_t* ks = nullptr;
  const int32_t* ke = nullptr;
  float* logits = nullptr;
  int64_t ldl = 0;
  int num_token_blocks = 0;  // Q-resident: blocks of kTokens tokens; K-resident: token chunks
  int key_splits = 1;        // Q-resident: parts each token block's key range is cut into
  int tail_blocks = 0;       // Q-resident: the last (shortest) token blocks, cut into tail_splits parts instead
  int tail_splits = 1;
  bool mma_only = false;     // timing only, FP8DSA_TUNING builds: skip the epilogue (writes nothing)
  bool ping_pong = true;     // Q-resident: consumers issue their MMAs in rotation
};

// Q-resident variants (see q_resident_scorer.cuh). Wide: B = 256 (token, head) columns, two
// consumer warpgroups; narrow: B = 128 columns (128 / H tokens, the seed's N_TOKENS), three.
// "Shared": every consumer scores every key tile with its own token block; otherwise the
// consumers share one token block and split the key tiles. The default build has kWideShared for
// H >= 32 and kNarrowShared below (what kAuto takes); FP8DSA_TUNING builds add kNarrowShared at
// H >= 32 and kWide / kNarrow (H >= 32, D = 128) for the timing comparison.
enum class QResidentShape : int { kAuto = 0, kWide, kNarrow, kWideShared, kNarrowShared };

struct QResidentTuning {
  QResidentShape shape = QResidentShape::kAuto;
  int key_splits = 0;  // 0: chosen from the grid size
  int tail_blocks = -1;  // -1: chosen from the grid size (choose_tail_splits); 0: none. Plain logits only:
                         // other outputs (fused_topk's) run uncut whatever it says
  int tail_splits = 0;   // with tail_blocks > 0: parts of each tail block's key range
  bool mma_only = false;  // timing only (see ScorerArgs); refused by a default build
  bool ping_pong = true;  // see ScorerArgs
};

// Validated, resolved params; T > 0 and N > 0. Asynchronous on params.stream. They store only
// the cells inside [ks, ke) (fill_masked is handled by the caller). `tail_blocks`, when given,
// receives the token blocks whose key ranges the Q-resident launch cut finer (0: its last wave is
// not cut; indexer_logits then runs the fill beside it).
Status run_q_resident(const IndexerParams& params, const QResidentTuning& tuning = {}, int* tail_blocks = nullptr);
Status run_q_resident_d64(const IndexerParams& params, const QResidentTuning& tuning, int* tail_blocks);
Status run_q_resident_d128(const IndexerParams& params, const QResidentTuning& tuning, int* tail_blocks);
Status run_k_resident(const IndexerParams& params);

// Writes -inf to every cell of [T, N] outside [ks, ke) (the fill_masked option). kAfterScorer (what
// indexer_logits runs) launches it right after the scorer, overlapped with the scorer's last CTAs;
// kSerial is a plain launch (the timing driver's comparison).
enum class FillLaunch { kAfterScorer, kSerial };
Status fill_masked_cells(const IndexerParams& params, FillLaunch launch = FillLaunch::kAfterScorer);

}  // namespace fp8dsa::detail::indexer
