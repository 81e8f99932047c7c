#include "indexer_problem.h"

#include <algorithm>
#include <utility>

#include "tools/random_inputs.h"

namespace fp8dsa::indexer_test {

void make_problem(const ProblemShape& s, std::vector<int32_t> ks, std::vector<int32_t> ke, uint64_t seed,
                  IndexerProblem* pr) {
  const int64_t T = s.num_tokens, N = s.num_keys;
  const int H = s.num_heads, D = s.head_dim;
  const int64_t q_stride = int64_t{H} * D + (s.padded_strides ? s.q_pad : 0);
  const int64_t w_stride = H + (s.padded_strides ? s.w_pad : 0);
  const int64_t k_stride = D + (s.padded_strides ? s.k_pad : 0);
  const int64_t logits_stride = min_logits_stride(N) + (s.padded_strides ? s.ldl_pad : 0);
  pr->q = tools::random_e4m3(static_cast<size_t>(T * q_stride), seed, -s.qk_range, s.qk_range);
  pr->k = tools::random_e4m3(static_cast<size_t>(N * k_stride), seed + 1, -s.qk_range, s.qk_range);
  pr->w = tools::random_f32(static_cast<size_t>(T * w_stride), seed + 2, -1.0f, 1.0f);
  pr->k_scale = tools::random_f32(static_cast<size_t>(N), seed + 3, s.k_scale_min, 2.0f);
  pr->ks = std::move(ks);
  pr->ke = std::move(ke);

  IndexerParams& p = pr->host;
  p = IndexerParams{};
  p.num_tokens = T;
  p.num_keys = N;
  p.num_heads = H;
  p.head_dim = D;
  p.q = pr->q.data();
  p.q_token_stride = q_stride;
  p.w = pr->w.data();
  p.w_token_stride = w_stride;
  p.k = pr->k.data();
  p.k_row_stride = k_stride;
  p.k_scale = pr->k_scale.data();
  p.ks = pr->ks.data();
  p.ke = pr->ke.data();
  p.logits_stride = logits_stride;

  pr->d_q = tools::DeviceBuffer<uint8_t>(pr->q);
  pr->d_k = tools::DeviceBuffer<uint8_t>(pr->k);
  pr->d_w = tools::DeviceBuffer<float>(pr->w);
  pr->d_k_scale = tools::DeviceBuffer<float>(pr->k_scale);
  pr->d_ks = tools::DeviceBuffer<int32_t>(pr->ks);
  pr->d_ke = tools::DeviceBuffer<int32_t>(pr->ke);
  pr->d_logits = tools::DeviceBuffer<float>(static_cast<size_t>(T * logits_stride));
  IndexerParams& d = pr->device;
  d = p;
  d.q = pr->d_q.get();
  d.w = pr->d_w.get();
  d.k = pr->d_k.get();
  d.k_scale = pr->d_k_scale.get();
  d.ks = pr->d_ks.get();
  d.ke = pr->d_ke.get();
  d.logits = pr->d_logits.get();
}

int64_t clamped(int32_t bound, int64_t n) { return std::clamp<int64_t>(bound, 0, n); }

std::function<bool(size_t)> owned_cells(const IndexerProblem& pr, bool fill_masked) {
  const int64_t logits_stride = pr.host.logits_stride, T = pr.host.num_tokens, N = pr.host.num_keys;
  const int32_t* ks = pr.ks.data();
  const int32_t* ke = pr.ke.data();
  return [=](size_t i) {
    const int64_t t = static_cast<int64_t>(i) / logits_stride, s = static_cast<int64_t>(i) % logits_stride;
    if (t >= T || s >= N) return false;
    if (fill_masked) return true;
    const int64_t lo = clamped(ks[t], N);
    return s >= lo && s < std::max(lo, clamped(ke[t], N));
  };
}

}  // namespace fp8dsa::indexer_test
