// The indexer reference (SPEC 1): the spec in code. Inputs are dequantised exactly (every e4m3 and
// bf16 value is a double), the per-head dot products are exact in f64 (e4m3 products have at most
// 8 significant bits and D <= 128 of them fit in 53), and the head sum is an f64 sum. Only what is read
// is dequantised: q token by token, k tile by tile (score_all).
#include "indexer/reference_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/no_throw.h"
#include "core/parallel_for.h"
#include "core/reference_math.h"
#include "core/validate.h"
#include "fp8dsa/fp8.h"

namespace fp8dsa::reference {
namespace {

constexpr const char* kOp = "indexer reference";

// Work is split into (key tile, token block) tasks; each dequantises only its tile's k rows that
// some token of its block scores, and each such token's q, so no copy of the whole k or q is made
// (f64 is 8x an e4m3 input). The conversions cost 1 / kTokenBlock (k) and 1 / kKeyTile (q) of the
// dot products.
constexpr int64_t kKeyTile = 256;
constexpr int64_t kTokenBlock = 64;

// The clamped half-open key range of token t.
void key_range(const IndexerParams& p, int64_t t, int64_t* lo, int64_t* hi) {
  *lo = std::clamp<int64_t>(p.ks[t], 0, p.num_keys);
  *hi = std::clamp<int64_t>(p.ke[t], 0, p.num_keys);
  if (*hi < *lo) *hi = *lo;
}

// Scores every token against every key of its range; calls emit(t, s, logit) for each, from
// several threads at once for distinct (t, s).
template <typename Emit>
void score_all(const IndexerParams& p, Emit&& emit) {
  const int64_t d = p.head_dim;
  const int64_t hd = int64_t{p.num_heads} * d;
  const int64_t tiles = (p.num_keys + kKeyTile - 1) / kKeyTile;
  const int64_t blocks = (p.num_tokens + kTokenBlock - 1) / kTokenBlock;
  parallel_for(0, tiles * blocks, [&](int64_t task) {
    const int64_t tile_lo = (task / blocks) * kKeyTile;
    const int64_t tile_hi = std::min(p.num_keys, tile_lo + kKeyTile);
    const int64_t t_lo = (task % blocks) * kTokenBlock;
    const int64_t t_hi = std::min(p.num_tokens, t_lo + kTokenBlock);
    // The tile's rows that some token of the block scores.
    int64_t used_lo = tile_hi, used_hi = tile_lo;
    for (int64_t t = t_lo; t < t_hi; ++t) {
      int64_t lo, hi;
      key_range(p, t, &lo, &hi);
      lo = std::max(lo, tile_lo);
      hi = std::min(hi, tile_hi);
      if (lo >= hi) continue;
      used_lo = std::min(used_lo, lo);
      used_hi = std::max(used_hi, hi);
    }
    if (used_lo >= used_hi) return;
    std::vector<double> k((used_hi - used_lo) * d);
    for (int64_t s = used_lo; s < used_hi; ++s) {
      for (int64_t i = 0; i < d; ++i) k[(s - used_lo) * d + i] = load_element(p.k, p.k_dtype, s * p.k_row_stride + i);
    }
    std::vector<double> q(static_cast<size_t>(hd));
    for (int64_t t = t_lo; t < t_hi; ++t) {
      int64_t lo, hi;
      key_range(p, t, &lo, &hi);
      lo = std::max(lo, used_lo);
      hi = std::min(hi, used_hi);
      if (lo >= hi) continue;
      for (int64_t i = 0; i < hd; ++i) q[i] = load_element(p.q, p.q_dtype, t * p.q_token_stride + i);
      const float* w_t = p.w + t * p.w_token_stride;
      for (int64_t s = lo; s < hi; ++s) {
        const double* k_s = k.data() + (s - used_lo) * d;
        double acc = 0.0;
        for (int h = 0; h < p.num_heads; ++h) {
          const double dot = dot_product(q.data() + h * d, k_s, d);
          acc += static_cast<double>(w_t[h]) * std::max(dot, 0.0);
        }
        emit(t, s, static_cast<double>(p.k_scale[s]) * acc);
      }
    }
  });
}

Status check_dtypes(const IndexerParams& p) {
  if (!is_float_dtype(p.q_dtype) || !is_float_dtype(p.k_dtype)) {
    return invalid_argument(std::string(kOp) + ": unsupported dtypes q=" + dtype_name(p.q_dtype) +
                            " k=" + dtype_name(p.k_dtype));
  }
  return Status::ok();
}

Status indexer_logits_cpu_unguarded(const IndexerParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const IndexerParams p = params.resolved();
  FP8DSA_RETURN_IF_ERROR(check_dtypes(p));
  score_all(p, [&](int64_t t, int64_t s, double logit) {
    p.logits[t * p.logits_stride + s] = static_cast<float>(logit);
  });
  if (p.fill_masked) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    parallel_for(0, p.num_tokens, [&](int64_t t) {
      float* row = p.logits + t * p.logits_stride;
      int64_t lo, hi;
      key_range(p, t, &lo, &hi);
      std::fill(row, row + lo, kMasked);
      std::fill(row + hi, row + p.num_keys, kMasked);
    });
  }
  return Status::ok();
}

Status indexer_logits_cpu_f64_unguarded(const IndexerParams& params, std::vector<double>* logits) {
  if (logits == nullptr) return invalid_argument("indexer_logits_cpu_f64: logits vector is null");
  // The f32 output (logits, logits_stride) is not used here; stand in an aligned dummy so that validate()
  // checks everything else.
  alignas(256) static float unused_output;
  IndexerParams checked = params;
  checked.logits = &unused_output;
  checked.logits_stride =
      checked.num_keys >= 0 && checked.num_keys <= detail::kMaxExtent ? min_logits_stride(checked.num_keys) : 0;
  FP8DSA_RETURN_IF_ERROR(validate(checked));
  const IndexerParams p = checked.resolved();
  FP8DSA_RETURN_IF_ERROR(check_dtypes(p));
  logits->assign(static_cast<size_t>(p.num_tokens * p.num_keys), -std::numeric_limits<double>::infinity());
  score_all(p, [&](int64_t t, int64_t s, double logit) { (*logits)[static_cast<size_t>(t * p.num_keys + s)] = logit; });
  return Status::ok();
}

}  // namespace

Status indexer_logits_cpu(const IndexerParams& params) {
  return detail::no_throw(kOp, [&] { return indexer_logits_cpu_unguarded(params); });
}

Status indexer_logits_cpu_f64(const IndexerParams& params, std::vector<double>* logits) {
  return detail::no_throw(kOp, [&] { return indexer_logits_cpu_f64_unguarded(params, logits); });
}

}  // namespace fp8dsa::reference
