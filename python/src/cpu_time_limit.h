// The CPU references' time limit: the estimate the fp8dsa command refuses a run on
// (fp8dsa/cpu_time.h), made from one call's params before it runs, and a ValueError when it
// passes the caller's max_seconds.
#pragma once

#include "array_checks.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::python {

// The (token, key) pairs the indexer scores: [ks, ke) clamped to [0, N), summed over the tokens.
// Reads ks and ke (host arrays).
double indexer_pairs(const IndexerParams& p);

// The keys the sparse MLA reference attends over, summed over the tokens: the indices inside
// [0, N) among each token's first topk_length (or topk). Reads indices and topk_length.
double attention_keys(const SparseMlaParams& p);

// The keys the prefill reference's selection gives each token, min(topk, its pair count), summed.
double selected_keys(const IndexerParams& p, int topk);

// ValueError past max_seconds (+inf: no limit), with the estimate, how to run it anyway and the
// GPU call that does the work instead.
void refuse_past_time_limit(const ArrayChecker& arrays, double indexer_flops, double sparse_mla_flops,
                            double max_seconds, const char* gpu_call);

}  // namespace fp8dsa::python
