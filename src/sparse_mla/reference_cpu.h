// Internal: the f64 form of the sparse MLA reference, the accuracy yardstick of SPEC 6 for the CPU
// and the GPU tests.
#pragma once

#include <vector>

#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"

namespace fp8dsa::reference {

// Per (token, head) row, over its valid keys: the standard deviation of the scores s_j and
// max_j |s_j| (what SPEC 6's lse / max_logits bound depends on); 0 for a row with no valid key.
struct SparseMlaScoreSpread {
  std::vector<double> std;
  std::vector<double> max_abs;
};

// Validates params, then computes SPEC 4 in f64 on the dequantised inputs with an exact softmax:
//   *out        [T, h, d_v] packed: kv_scale * sum_j softmax(s)_j * kv[idx_j, :d_v], sink applied
//   *lse        [T, h]: natural-log sum of exp(s_j); +inf for a token with no valid key
//   *max_logits [T, h]: max_j s_j; -inf for a token with no valid key (out is then 0)
// Any of the three vectors may be null (not computed). params.out / lse / max_logits are neither
// read nor written. A valid index that appears several times in a row counts once per appearance
// (as in FlashMLA: the row is simply a list of keys). To check a subset of tokens, offset q,
// indices and topk_length by the first token and lower num_tokens. *spread, when given, gets each
// row's score statistics.
Status sparse_mla_cpu_f64(const SparseMlaParams& params, std::vector<double>* out,
                          std::vector<double>* lse, std::vector<double>* max_logits,
                          SparseMlaScoreSpread* spread = nullptr);

// The same f64 computation on the values *before* their rounding to the kernel's input format
// (SPEC 6's R0): params is the rounded problem (validated as it is; its index selection, lengths,
// sm_scale and sink are used), q_unrounded holds the true query values in params' q layout (its
// element strides, q_scale folded in) and kv_unrounded the true rows packed [N, d_qk] (kv_scale
// folded in). The results are what the kernel would give with no input rounding at all.
Status sparse_mla_cpu_f64_unrounded(const SparseMlaParams& params, const float* q_unrounded,
                                    const float* kv_unrounded, std::vector<double>* out,
                                    std::vector<double>* lse, std::vector<double>* max_logits);

}  // namespace fp8dsa::reference
