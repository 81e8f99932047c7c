#include "tools/sampled_mla_reference.h"

namespace fp8dsa::tools {

Status SampledMlaReference::build(const SparseMlaParams& problem, int64_t every, const float* q_unrounded,
                                  int64_t q_unrounded_token_stride, const float* kv_unrounded) {
  if (every < 1) return invalid_argument("SampledMlaReference: every must be >= 1");
  every_ = every;
  problem_ = problem.resolved();
  sampled_ = problem_;
  sampled_.num_tokens = (problem_.num_tokens + every - 1) / every;
  sampled_.q_token_stride *= every;
  sampled_.indices_stride *= every;
  lengths_.clear();
  if (problem_.topk_length != nullptr) {
    for (int64_t i = 0; i < sampled_.num_tokens; ++i) lengths_.push_back(problem_.topk_length[i * every]);
    sampled_.topk_length = lengths_.data();
  }
  FP8DSA_RETURN_IF_ERROR(reference::sparse_mla_cpu_f64(sampled_, &out_, &lse_, &max_logits_, &spread_));
  out0_.clear();
  if (q_unrounded == nullptr && kv_unrounded == nullptr) return Status::ok();
  SparseMlaParams unrounded = sampled_;
  unrounded.q_token_stride = q_unrounded_token_stride;
  return reference::sparse_mla_cpu_f64_unrounded(unrounded, q_unrounded, kv_unrounded, &out0_, &lse0_, &max_logits0_);
}

SparseMlaOutputs SampledMlaReference::sampled_outputs(const uint16_t* out, const float* lse,
                                                     const float* max_logits) const {
  SparseMlaOutputs got;
  got.out = out;
  got.out_token_stride = problem_.out_token_stride * every_;
  got.out_head_stride = problem_.out_head_stride;
  got.lse = lse;
  got.max_logits = max_logits;
  got.row_token_stride = int64_t{problem_.num_heads} * every_;
  return got;
}

SparseMlaCheck SampledMlaReference::check(const uint16_t* out, const float* lse, const float* max_logits) const {
  const SparseMlaOutputs got = sampled_outputs(out, lse, max_logits);
  SparseMlaTolerance tol;
  tol.row_score_std = &spread_.std;
  tol.row_score_max_abs = &spread_.max_abs;
  return check_sparse_mla(got, out_, lse_, max_logits_, sampled_.num_tokens, problem_.num_heads, problem_.d_v, tol);
}

RoundingCheck SampledMlaReference::check_against_rounding(const uint16_t* out, const float* lse,
                                                         const float* max_logits) const {
  if (out0_.empty()) {
    RoundingCheck c;
    c.description = "SampledMlaReference: built without the unrounded values";
    return c;
  }
  return tools::check_against_rounding(sampled_outputs(out, lse, max_logits), out_, lse_, max_logits_, out0_, lse0_,
                                       max_logits0_, sampled_.num_tokens, problem_.num_heads, problem_.d_v);
}

}  // namespace fp8dsa::tools
