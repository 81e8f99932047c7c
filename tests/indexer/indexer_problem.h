// Indexer GPU tests: one random problem (host inputs, their device copies, params for both sides),
// shared by the reference-kernel and the tensor-core-scorer tests.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/gpu_test.h"
#include "fp8dsa/indexer.h"

namespace fp8dsa::indexer_test {

struct ProblemShape {
  int64_t num_tokens;
  int64_t num_keys;
  int num_heads;
  int head_dim = 128;
  bool padded_strides = false;  // q / w / k / logits rows wider than packed, by the pads below
  int64_t q_pad = 48, w_pad = 5, k_pad = 32, ldl_pad = 12;  // elements (logits rows stay 16-byte)
  float qk_range = 3.0f;        // q and k uniform in [-qk_range, qk_range)
  float k_scale_min = 0.05f;    // k_scale uniform in [k_scale_min, 2)
};

// Host inputs plus their device copies; `host` and `device` are the same problem.
struct IndexerProblem {
  std::vector<uint8_t> q, k;
  std::vector<float> w, k_scale;
  std::vector<int32_t> ks, ke;
  IndexerParams host;
  IndexerParams device;
  tools::DeviceBuffer<uint8_t> d_q, d_k;
  tools::DeviceBuffer<float> d_w, d_k_scale, d_logits;
  tools::DeviceBuffer<int32_t> d_ks, d_ke;
};

// Fresh random inputs (seeds seed .. seed + 3); key bounds as given (ks / ke of length T).
void make_problem(const ProblemShape& s, std::vector<int32_t> ks, std::vector<int32_t> ke, uint64_t seed,
                  IndexerProblem* pr);

int64_t clamped(int32_t bound, int64_t n);

// Cells inside the clamped [ks, ke) of their row (all N columns when fill_masked).
std::function<bool(size_t)> owned_cells(const IndexerProblem& pr, bool fill_masked);

}  // namespace fp8dsa::indexer_test
