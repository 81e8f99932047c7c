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
  int64_t logits_stride = 0;
  int num_token_blocks = 0;  // Q-resident: blocks of kTokens tokens; K-resident: token chunks
  int key_splits = 1;        // Q-resident: parts each token block's key range is cut into
  int tail_blocks = 0;       // Q-resident: the last (shortest) token blocks, cut into tail_splits parts instead
  int tail_splits = 1;
  bool mma_only = false;     // timing only, FP8DSA_TUNING builds: skip the epilogue (writes nothing)
  bool fence_exit = false;   // never set: the condition of the H = 32 schedule fence (config.h)
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

// Writes -inf to every cell of [T, N] outside [ks, ke) (the fill_masked option). kAfterScorer
// launches it right after the scorer, overlapped with the scorer's last CTAs; kSerial is a plain
// launch (after a scorer whose last wave was cut finer, and the timing driver's comparison).
enum class FillLaunch { kAfterScorer, kSerial };

// What a Q-resident launch does, decided on the host before anything runs (key_splits.h has the
// rules): the grid of token blocks x key splits, its last wave's blocks cut into tail_splits parts
// (plain logits only), and where indexer_logits runs the fill. The launch reads it; nothing about
// the launch flows back to its caller.
struct QResidentPlan {
  int block_tokens = 0;  // tokens of one CTA (the tuning's shape)
  int64_t token_blocks = 0;
  int key_splits = 1;
  int tail_blocks = 0;  // the last token blocks, cut into tail_splits parts instead (0: no cut)
  int tail_splits = 1;  // key_splits when there is no cut
  FillLaunch fill = FillLaunch::kAfterScorer;  // kSerial after a cut: no SM idles beside the last wave

  int64_t grid() const { return (token_blocks - tail_blocks) * key_splits + int64_t{tail_blocks} * tail_splits; }
};

// Tokens of one CTA of a shape at H heads (kAuto: the shape the default build picks).
int q_resident_block_tokens(QResidentShape shape, int heads);

// The plan for a grid of `block_tokens`-token CTAs on `sms` SMs; `cut_allowed` is false for outputs
// that lay out their work per key split (the fused path's), which then run uncut whatever the tuning
// says. InvalidArgument for a tuning tail out of range or a grid past INT32_MAX CTAs. No CUDA call.
Status plan_q_resident_grid(int64_t num_tokens, int64_t num_keys, int heads, bool fill_masked, int block_tokens,
                            bool cut_allowed, const QResidentTuning& tuning, int64_t sms, QResidentPlan* plan);
// The same for validated, resolved params with plain logits output, on this device's SMs.
Status plan_q_resident(const IndexerParams& params, const QResidentTuning& tuning, QResidentPlan* plan);

// Validated, resolved params; T > 0 and N > 0. Asynchronous on params.stream. They store only
// the cells inside [ks, ke) (fill_masked is handled by the caller). `plan`, when given, is
// plan_q_resident's for the same params and tuning; without one the launch plans for itself.
Status run_q_resident(const IndexerParams& params, const QResidentTuning& tuning = {},
                      const QResidentPlan* plan = nullptr);
Status run_q_resident_d64(const IndexerParams& params, const QResidentTuning& tuning, const QResidentPlan* plan);
Status run_q_resident_d128(const IndexerParams& params, const QResidentTuning& tuning, const QResidentPlan* plan);
Status run_k_resident(const IndexerParams& params);

Status fill_masked_cells(const IndexerParams& params, FillLaunch launch = FillLaunch::kAfterScorer);

}  // namespace fp8dsa::detail::indexer
