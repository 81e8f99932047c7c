// A sparse MLA problem split by keys the way a context-parallel prefill splits it (keys with
// row % R == r go to part r), for the lse_merge tests: the host inputs, each part's index list
// and the parts' results stacked as lse_merge takes them.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8dsa/lse_merge.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::lse_merge_test {

constexpr int kDqk = 576, kDv = 512;

struct SplitProblem {
  int64_t num_tokens = 0, num_kv = 0;
  int num_heads = 0, topk = 0;
  std::vector<uint8_t> q, kv;                 // e4m3, packed
  std::vector<int32_t> indices, topk_length;  // [T, topk], [T]
  std::vector<float> sink;                    // [h]
  SparseMlaParams params(const int32_t* indices_of) const;  // host pointers, no outputs, no sink
  // part r's index list: the entries whose row % num_parts == r, -1 elsewhere
  std::vector<int32_t> part_indices(int r, int num_parts) const;
};

// T tokens over N rows with h heads, a tenth of the indices invalid (SPEC 4's values), token 0 with
// no valid key, random topk_length and sinks (+inf on head 0).
SplitProblem make_split_problem(int64_t num_tokens, int64_t num_kv, int num_heads, int topk, uint64_t seed);

}  // namespace fp8dsa::lse_merge_test
