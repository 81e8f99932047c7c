#include "split_problem.h"

#include <cmath>

#include "tools/random_inputs.h"

namespace fp8dsa::lse_merge_test {

SparseMlaParams SplitProblem::params(const int32_t* indices_of) const {
  SparseMlaParams p;
  p.num_tokens = num_tokens;
  p.num_kv = num_kv;
  p.num_heads = num_heads;
  p.topk = topk;
  p.q = q.data();
  p.kv = kv.data();
  p.indices = indices_of;
  p.topk_length = topk_length.data();
  p.sm_scale = 0.07216878f;
  return p;
}

std::vector<int32_t> SplitProblem::part_indices(int r, int num_parts) const {
  std::vector<int32_t> out(indices);
  for (int32_t& i : out) {
    if (i >= 0 && i < num_kv && i % num_parts != r) i = -1;
  }
  return out;
}

SplitProblem make_split_problem(int64_t num_tokens, int64_t num_kv, int num_heads, int topk, uint64_t seed) {
  SplitProblem s;
  s.num_tokens = num_tokens;
  s.num_kv = num_kv;
  s.num_heads = num_heads;
  s.topk = topk;
  s.q = tools::random_e4m3(static_cast<size_t>(num_tokens) * num_heads * kDqk, seed, -2.0f, 2.0f);
  s.kv = tools::random_e4m3(static_cast<size_t>(num_kv) * kDqk, seed + 1, -1.0f, 1.0f);
  s.indices = tools::random_indices(num_tokens, topk, num_kv, seed + 2);
  for (int j = 0; j < topk; ++j) s.indices[j] = -1;  // token 0: no valid key
  const std::vector<float> lengths = tools::random_f32(static_cast<size_t>(num_tokens), seed + 3, 0.0f, 1.2f);
  for (float x : lengths) s.topk_length.push_back(static_cast<int32_t>(x * topk));
  s.sink = tools::random_f32(static_cast<size_t>(num_heads), seed + 4, -2.0f, 4.0f);
  s.sink[0] = INFINITY;
  return s;
}

}  // namespace fp8dsa::lse_merge_test
