// The tools tests' common step: the CPU reference of a problem into packed host outputs, checked
// against the rounding of its inputs (SampledMlaReference over every token).
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "fp8dsa/sparse_mla.h"
#include "tools/metrics.h"
#include "tools/sampled_mla_reference.h"

namespace fp8dsa::tools_test {

struct ReferenceRun {
  std::vector<uint16_t> out;
  std::vector<float> lse, max_logits;
  tools::SampledMlaReference ref;  // built with the unrounded values

  tools::RoundingCheck check() const { return ref.check_against_rounding(out.data(), lse.data(), max_logits.data()); }
};

// p: host inputs (its outputs are set here); q_unrounded in p's q layout, kv_unrounded [N, 576].
inline void run_reference(SparseMlaParams p, const float* q_unrounded, const float* kv_unrounded, ReferenceRun* run) {
  const size_t rows = static_cast<size_t>(p.num_tokens) * p.num_heads;
  run->out.assign(rows * 512, 0);
  run->lse.assign(rows, 0.0f);
  run->max_logits.assign(rows, 0.0f);
  p.out = run->out.data();
  p.lse = run->lse.data();
  p.max_logits = run->max_logits.data();
  p.out_token_stride = p.out_head_stride = 0;
  ASSERT_TRUE(reference::sparse_mla_cpu(p).is_ok());
  ASSERT_TRUE(run->ref.build(p, 1, q_unrounded, p.resolved().q_token_stride, kv_unrounded).is_ok());
}

}  // namespace fp8dsa::tools_test
