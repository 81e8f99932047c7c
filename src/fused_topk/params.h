// Internal: the stage params the fused call stands for, so that the indexer's and the top-k's own
// checks run on it exactly as they do for the two stages.
#pragma once

#include "fp8dsa/fused_topk.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/topk.h"

namespace fp8dsa::detail::fused_topk {

// The scorer's params, resolved, with a placeholder where the unfused call has its logits.
IndexerParams scorer_params(const FusedTopkParams& params);
// The select's params, resolved: the scorer's rows and bounds, params.select's k and output.
TopkParams select_params(const FusedTopkParams& params);

}  // namespace fp8dsa::detail::fused_topk
