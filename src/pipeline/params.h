// Internal: the part of the PrefillParams checks that the workspace size depends on.
#pragma once

#include "fp8dsa/indexer.h"
#include "fp8dsa/pipeline.h"

namespace fp8dsa::detail::pipeline {

// topk and the indexer's num_tokens / num_keys, with the messages validate() gives for them.
Status validate_shape(const PrefillParams& params);

// Whether prefill() runs the fused score + top-k for these (validated) params: when fused is set,
// or when the workspace holds neither the unfused path's logits nor those of its smallest automatic
// chunk, but the fused path's needs, and the indexer kernel is kAuto or kQResident (pipeline.cpp).
bool runs_fused(const PrefillParams& params);
// The tokens a chunk of the unfused path scores and selects at a time for these (validated)
// params (num_tokens: one chunk), or 0 where the fused path runs.
int64_t selection_chunk(const PrefillParams& params);

// The unfused selection a chunk of tokens at a time: indexer.num_tokens tokens in chunks of
// chunk_tokens (> 0), each chunk's logits into indexer.logits ([chunk_tokens, indexer.logits_stride]) and
// then its top-k into rows [t0, t0 + chunk) of topk.indices, with topk's other fields (num_rows,
// ks, ke, row_seq and row_pos_base are the chunk's). One stream: the next chunk's scorer runs after
// this chunk's top-k.
Status select_in_chunks(const IndexerParams& indexer, const TopkParams& topk, int64_t chunk_tokens);

}  // namespace fp8dsa::detail::pipeline
