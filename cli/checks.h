// The CLI's accuracy checks: a sample of tokens recomputed by the f64 CPU references and judged by
// the SPEC 6 metrics (tools/metrics.h, the same functions the tests use).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8dsa/status.h"
#include "problem.h"

namespace fp8dsa::cli {

// What the kernels under test produced for the sampled tokens, packed in sample order.
struct SampledOutputs {
  std::vector<int64_t> tokens;
  std::vector<float> logits;           // [S, N] (row stride N)
  std::vector<int32_t> indices;        // [S, topk]
  std::vector<uint16_t> out;           // [S, h, d_v] bf16
  std::vector<float> lse, max_logits;  // [S, h]
};

struct CheckOutcome {
  bool ran = false;
  bool passed = true;
  std::string summary;  // one short cell for the table
  std::string detail;   // the metric's full description, printed when the check fails
};

// The f64 reference logits [S, N] of the sampled tokens (-inf outside each row's range).
Status reference_logits(const HostProblem& problem, const std::vector<int64_t>& tokens,
                        std::vector<double>* logits);

// SPEC 6 indexer metric of got.logits against the f64 reference.
CheckOutcome check_indexer(const HostProblem& problem, const SampledOutputs& got,
                           const std::vector<double>& ref_logits);
// The selection got.indices against the exact top-k of the logits it was taken from, got.logits
// (ties aside).
CheckOutcome check_topk(const HostProblem& problem, const SampledOutputs& got);
// The attention outputs against the f64 reference run on the same selected rows (got.indices).
CheckOutcome check_attention(const HostProblem& problem, const SampledOutputs& got);

}  // namespace fp8dsa::cli
