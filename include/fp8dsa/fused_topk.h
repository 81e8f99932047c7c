// Stages 1 and 2 in one pass (SPEC section 3): the indexer's scores and their top-k selection
// without the [T, N] logits. The same inputs as indexer_logits() and the same outputs as topk()
// on those logits: per token the min(k, ke - ks) best key rows (absolute, or through the page
// table), -1 in the unused slots, every index valid and distinct, NaN lowest, -inf a candidate.
//
// The selection is exact under the order (score descending, key row ascending): of keys with
// equal scores the lower rows win, so every run returns the same indices, in ascending row order,
// or by descending score (ties: lower row first) with `sorted`. Scores are computed by the same
// FP8 tensor-core scorer as indexer_logits(kQResident), bit for bit, so the index sets equal
// topk() over that kernel's logits up to ties.
//
// Memory: the workspace holds, per token and key split, a candidate buffer of
// max(2k, k + 512) entries (8 bytes each; 32 KB at k = 2048) instead of 4 * N bytes of logits.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "fp8dsa/topk.h"

namespace fp8dsa {

struct FusedTopkParams {
  // The scorer's inputs, as for indexer_logits(). logits, logits_stride and fill_masked are ignored (there
  // are no logits); kernel must be kAuto or kQResident (the fused scorer is the Q-resident one).
  IndexerParams scores;
  // The selection, as for topk(): k, indices, indices_stride, sorted and the page-table fields.
  // num_rows, num_keys, ks, ke come from `scores`; logits, logits_stride and workspace are ignored.
  TopkParams select;
  void* workspace = nullptr;  // at least fused_topk_workspace_bytes(params), kWorkspaceAlignment-aligned
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;  // overrides scores.stream and select.stream
};

Status validate(const FusedTopkParams& params);

// Workspace for these params on the current device (the key split count depends on its SM count;
// without a device, the size for one split). Checks the shape (sizes, num_heads, k); pointers are
// not needed. The size_t form returns SIZE_MAX where the Status form fails.
Status fused_topk_workspace_bytes(const FusedTopkParams& params, size_t* bytes);
size_t fused_topk_workspace_bytes(const FusedTopkParams& params);

// GPU fused score + top-k. No allocation, no host synchronisation: CUDA-graph capturable.
Status fused_topk(const FusedTopkParams& params);

namespace reference {
// indexer_logits_cpu then topk_cpu, a block of rows at a time (host memory O(rows * N), not
// O(T * N)). Host pointers; the workspace is not used. OutOfMemory when the host runs out.
Status fused_topk_cpu(const FusedTopkParams& params);
}  // namespace reference

}  // namespace fp8dsa
