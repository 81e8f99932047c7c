// The whole prefill (SPEC section 5): indexer scoring -> top-k (or the fused score + top-k) ->
// sparse MLA, for one ragged batch, in one call. Every buffer comes from the caller or from a
// workspace sized by prefill_workspace_bytes(); no allocation or host synchronisation inside, so
// the call is CUDA-graph capturable on any stream.
#pragma once

#include <cstddef>

#include "fp8dsa/indexer.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"
#include "fp8dsa/topk.h"

namespace fp8dsa {

struct PrefillParams {
  // Indexer inputs and bounds. indexer.logits / indexer.logits_stride are ignored: the logits live in the
  // workspace (or nowhere, with the fused path).
  IndexerParams indexer;
  // Attention inputs and outputs. attention.indices / indices_stride / topk are ignored: the
  // selected rows live in the workspace, topk below sets the count. attention.topk_length must be
  // null (rejected otherwise): each token attends over the min(topk, ke - ks) keys its top-k
  // selected. attention.num_tokens and num_kv must equal indexer.num_tokens and num_keys (the two
  // stages share one key space).
  SparseMlaParams attention;
  int topk = 2048;      // k of the selection and topk of the attention; a multiple of 64, <= 2048
  // The selection: true forces the fused score + top-k (no [T, N] logits buffer: for when memory
  // counts). false takes the unfused indexer + top-k, measured faster at every shape (bench/RESULTS.md):
  //   - over all T tokens at once where the workspace holds their logits;
  //   - else in chunks of tokens, each chunk's logits scored and selected before the next one's
  //     (one [chunk, N] buffer), where the workspace holds the logits of at least
  //     kMinSelectionChunkTokens tokens: the largest multiple of kSelectionChunkStep that fits;
  //   - else the fused path, where the workspace holds its needs (and indexer.kernel allows the
  //     Q-resident scorer).
  bool fused = false;
  // The unfused path's chunk: 0 = as above; C > 0 = at most C tokens a chunk, whatever the
  // workspace (prefill_workspace_bytes() then sizes for chunks of min(C, T) tokens).
  int64_t selection_chunk_tokens = 0;

  // At least prefill_workspace_bytes(params) (with fused = true: the fused path's, usually far
  // smaller), kWorkspaceAlignment (256)-byte aligned.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;  // overrides the stages' own streams
};

// The automatic chunk of the unfused selection (PrefillParams::fused): a multiple of the step, and
// at least the minimum, below which the fused path is taken instead. H200, T = 4096, causal, k = 2048
// (bench/journal/2026-12-03.md, twelfth session): chunks of 1024 tokens run 1.02x the whole
// batch's time at N = 64K and 128K, H = 64, and 0.55-0.79x the fused path's everywhere; chunks of
// 512 run 0.61-0.88x the fused path's and tie with it at 8K, H = 64; chunks of 256 are no faster
// than it at H = 64.
inline constexpr int64_t kSelectionChunkStep = 64;
inline constexpr int64_t kMinSelectionChunkTokens = 512;

Status validate(const PrefillParams& params);

// The workspace prefill() needs: depends on indexer.num_tokens, indexer.num_keys, topk, fused and
// selection_chunk_tokens only (not on pointers). Rejects (InvalidArgument) a topk or size that validate() would reject,
// and a workspace that does not fit in size_t; *bytes is written only on success.
Status prefill_workspace_bytes(const PrefillParams& params, size_t* bytes);
// The same as a number: SIZE_MAX (no workspace suffices) where the form above fails.
size_t prefill_workspace_bytes(const PrefillParams& params);

Status prefill(const PrefillParams& params);

namespace reference {
// The three CPU references in sequence (host pointers). Allocates its own indices [T, topk] and
// logits for a block of tokens at a time; OutOfMemory where the host has not that much.
Status prefill_cpu(const PrefillParams& params);
}  // namespace reference

}  // namespace fp8dsa
