// The indexer's benchmark inputs (q, w, k, k_scale on the device, several sets to rotate through
// when one set fits in L2), shared by the indexer and fused score + top-k benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/device_buffer.h"
#include "tools/device_random.h"
#include "tools/timing.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/topk.h"
#include "op_benches.h"

namespace fp8dsa::bench {

struct IndexerInputs {
  tools::DeviceBytes q, w, k, k_scale;
  size_t bytes = 0;  // of the four
  // These inputs in `base` (which holds the shape and bounds).
  IndexerParams params(const IndexerParams& base) const;
};

// The shape of a benchmark's causal problem (T new tokens over N - T cached keys, its bounds in
// `bounds`) on ctx.stream, with no tensors yet: the `base` of IndexerInputs::params.
IndexerParams causal_indexer_shape(const BenchContext& ctx, int64_t num_tokens, int64_t num_keys, int num_heads,
                                   int head_dim, const tools::CausalBounds& bounds);

// The top-k (k per row, unsorted) of `logits` [T, N] for the rows and bounds of `scores`, into
// `indices`, on scores.stream, with its workspace allocated into `workspace`: the unfused path's
// second stage, ready for topk().
Status topk_of_logits(const IndexerParams& scores, const float* logits, int k, int32_t* indices,
                      tools::DeviceBytes* workspace, TopkParams* out);

// q, k e4m3 in +-1, w in [-1, 1) (the query scale and head weight folded, so may be negative),
// k_scale in [0.5, 1.5).
Status make_indexer_inputs(const BenchContext& ctx, int64_t num_tokens, int64_t num_keys, int num_heads, int head_dim,
                           std::vector<IndexerInputs>* sets);

}  // namespace fp8dsa::bench
