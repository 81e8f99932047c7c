// Internal: the f64 form of the indexer reference, for tests that compare against unrounded logits
// (SPEC 6 scores the indexer and the top-k against f64, not against the f32 the public call writes).
#pragma once

#include <vector>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"

namespace fp8dsa::reference {

// Validates params, then fills *logits with [T, N] packed f64 logits (row stride N, not logits_stride):
// cells inside the clamped [ks[t], ke[t]) hold the exact score of SPEC 1 (exact e4m3 products,
// f64 sums), every other cell holds -inf. params.logits is neither read nor written.
Status indexer_logits_cpu_f64(const IndexerParams& params, std::vector<double>* logits);

}  // namespace fp8dsa::reference
