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
  // Indexer inputs and bounds. indexer.logits / indexer.ldl are ignored: the logits live in the
  // workspace (or nowhere, with the fused path).
  IndexerParams indexer;
  // Attention inputs and outputs. attention.indices / indices_stride / topk are ignored: the
  // selected rows live in the workspace, topk below sets the count. attention.num_tokens and
  // num_kv must equal indexer.num_tokens and num_keys (the two stages share one key space).
  SparseMlaParams attention;
  int topk = 2048;      // k of the selection and topk of the attention; a multiple of 64, <= 2048
  bool fused = false;   // score + top-k in one pass (no [T, N] logits buffer)

  void* workspace = nullptr;  // at least prefill_workspace_bytes(params), kWorkspaceAlignment (256)-byte aligned
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;  // overrides the stages' own streams
};

Status validate(const PrefillParams& params);
size_t prefill_workspace_bytes(const PrefillParams& params);
Status prefill(const PrefillParams& params);

namespace reference {
// The three CPU references in sequence (host pointers; allocates its own logits and indices).
Status prefill_cpu(const PrefillParams& params);
}  // namespace reference

}  // namespace fp8dsa
