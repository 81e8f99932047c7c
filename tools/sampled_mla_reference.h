// The f64 reference of a sparse MLA problem's tokens t % every == 0 (reference::sparse_mla_cpu_f64,
// with each row's score spread), computed once, and the SPEC 6 check of any run's outputs on those
// tokens: for the large GPU tests and the benchmark, where the reference of every token costs too
// much. The sampled tokens are the problem itself with its token strides multiplied by `every`: q
// and the indices are not copied (only topk_length is), so the problem's host arrays must outlive
// the object.
#pragma once

#include <cstdint>
#include <vector>

#include "tools/metrics.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa::tools {

class SampledMlaReference {
 public:
  // problem: host pointers (its out / lse / max_logits are not used); every >= 1. With
  // q_unrounded and kv_unrounded (the values before their rounding, as MlaWorkload keeps them) the
  // f64 reference on them (R0) is computed too, for check_against_rounding: q_unrounded holds sampled
  // token i (problem token i * every) at i * q_unrounded_token_stride, each in the problem's head
  // layout; kv_unrounded is packed [N, 576].
  Status build(const SparseMlaParams& problem, int64_t every, const float* q_unrounded = nullptr,
               int64_t q_unrounded_token_stride = 0, const float* kv_unrounded = nullptr);

  // A run's outputs over all of the problem's tokens (out in the problem's layout, lse and
  // max_logits [T, h] packed; max_logits may be null) on the sampled tokens, under SPEC 6 with the
  // bound of each row's score spread.
  SparseMlaCheck check(const uint16_t* out, const float* lse, const float* max_logits) const;

  // The same outputs judged against the rounding of the inputs (metrics.h, check_against_rounding);
  // needs a build with the unrounded values (otherwise: not passed, and the description says why).
  RoundingCheck check_against_rounding(const uint16_t* out, const float* lse, const float* max_logits) const;

  int64_t sampled_tokens() const { return sampled_.num_tokens; }

 private:
  // A run's outputs over all tokens as views of the sampled ones.
  SparseMlaOutputs sampled_outputs(const uint16_t* out, const float* lse, const float* max_logits) const;

  int64_t every_ = 1;
  SparseMlaParams problem_;  // resolved strides
  SparseMlaParams sampled_;
  std::vector<int32_t> lengths_;
  std::vector<double> out_, lse_, max_logits_;
  std::vector<double> out0_, lse0_, max_logits0_;  // R0, when built with the unrounded values
  reference::SparseMlaScoreSpread spread_;
};

}  // namespace fp8dsa::tools
