#include "tools/metrics.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fp8dsa/fp8.h"

namespace fp8dsa::tools {
namespace {

constexpr int kMaxReported = 5;  // failing rows quoted in a description

void clamp_range(const int32_t* ks, const int32_t* ke, int64_t t, int64_t n, int64_t* lo, int64_t* hi) {
  *lo = std::clamp<int64_t>(ks[t], 0, n);
  *hi = std::max(*lo, std::clamp<int64_t>(ke[t], 0, n));
}

// NaN ranks below everything, as in the top-k contract.
bool ranks_above(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a > b;
}

bool tied(double a, double b, const TopkCheckOptions& o) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  return std::abs(a - b) <= o.rel_tol * std::max(std::abs(a), std::abs(b)) + o.abs_tol;
}

template <typename Score>
TopkCheck check_topk_impl(const int32_t* indices, int64_t indices_stride, int k, const Score* scores,
                          int64_t ld_scores, int64_t num_rows, int64_t num_keys, const int32_t* ks,
                          const int32_t* ke, const TopkCheckOptions& o) {
  TopkCheck c;
  c.rows = num_rows;
  std::ostringstream failures;
  int reported = 0;
  std::vector<double> got, expected;
  std::unordered_set<int32_t> seen;
  for (int64_t t = 0; t < num_rows; ++t) {
    int64_t lo, hi;
    clamp_range(ks, ke, t, num_keys, &lo, &hi);
    const int64_t want = std::min<int64_t>(k, hi - lo);
    const int32_t* row = indices + t * indices_stride;
    const Score* s = scores + t * ld_scores;
    std::ostringstream why;

    got.clear();
    seen.clear();
    int64_t count = 0, out_of_range = 0, duplicates = 0;
    bool padding_seen = false, misplaced = false, order_broken = false;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t idx = row[j];
      if (idx == -1) {
        padding_seen = true;
        continue;
      }
      ++count;
      if (padding_seen) misplaced = true;
      if (idx < lo || idx >= hi) {
        ++out_of_range;
        continue;
      }
      if (!seen.insert(idx).second) ++duplicates;
      const double score = static_cast<double>(s[idx]);
      if (o.sorted && !got.empty() && ranks_above(score, got.back()) && !tied(score, got.back(), o)) {
        order_broken = true;
      }
      got.push_back(score);
    }
    if (count != want) why << " count " << count << " != " << want << ";";
    if (out_of_range) why << " " << out_of_range << " outside [" << lo << ", " << hi << ");";
    if (duplicates) why << " " << duplicates << " duplicates;";
    if (o.padding_at_end && misplaced) why << " -1 before a selected index;";
    if (o.sorted && order_broken) why << " not in descending order;";

    bool selection_wrong = false;
    if (out_of_range == 0 && duplicates == 0 && count == want) {
      expected.assign(s + lo, s + hi);
      auto middle = expected.begin() + want;
      if (middle != expected.end()) std::nth_element(expected.begin(), middle, expected.end(), ranks_above);
      expected.resize(static_cast<size_t>(want));
      std::sort(expected.begin(), expected.end(), ranks_above);
      std::sort(got.begin(), got.end(), ranks_above);
      for (int64_t j = 0; j < want; ++j) {
        if (!tied(got[static_cast<size_t>(j)], expected[static_cast<size_t>(j)], o)) {
          why << " rank " << j << ": selected score " << got[static_cast<size_t>(j)] << " vs exact "
              << expected[static_cast<size_t>(j)] << ";";
          selection_wrong = true;
          break;
        }
      }
    }

    c.out_of_range += out_of_range;
    c.duplicates += duplicates;
    c.wrong_count += count != want;
    c.misplaced_padding += o.padding_at_end && misplaced;
    c.order_violations += o.sorted && order_broken;
    c.wrong_selection += selection_wrong;
    const std::string reason = why.str();
    if (!reason.empty()) {
      ++c.bad_rows;
      if (reported++ < kMaxReported) failures << "\n  row " << t << ":" << reason;
    }
  }
  c.passed = c.bad_rows == 0;
  std::ostringstream d;
  d << "top-k check: " << c.bad_rows << " of " << c.rows << " rows bad (out_of_range " << c.out_of_range
    << ", duplicates " << c.duplicates << ", wrong_count " << c.wrong_count << ", misplaced_padding "
    << c.misplaced_padding << ", wrong_selection " << c.wrong_selection << ", order_violations "
    << c.order_violations << ")" << failures.str();
  c.description = d.str();
  return c;
}

}  // namespace

double calc_diff(const double* x, const double* y, size_t n) {
  double xy = 0.0, sq = 0.0;
  for (size_t i = 0; i < n; ++i) {
    xy += x[i] * y[i];
    sq += x[i] * x[i] + y[i] * y[i];
  }
  if (sq == 0.0) return 0.0;
  return 1.0 - 2.0 * xy / sq;
}

IndexerCheck check_indexer_logits(const float* got, int64_t logits_stride, const double* ref, int64_t num_tokens,
                                  int64_t num_keys, const int32_t* ks, const int32_t* ke, double max_diff,
                                  double rel_max_abs) {
  IndexerCheck c;
  std::vector<double> x, y;
  std::ostringstream failures;
  int reported = 0;
  for (int64_t t = 0; t < num_tokens; ++t) {
    int64_t lo, hi;
    clamp_range(ks, ke, t, num_keys, &lo, &hi);
    for (int64_t s = lo; s < hi; ++s) {
      const double g = got[t * logits_stride + s];
      const double r = ref[t * num_keys + s];
      ++c.cells;
      if (!std::isfinite(r) || !std::isfinite(g)) {
        const bool same = (std::isnan(r) && std::isnan(g)) || r == g;
        if (!same) {
          ++c.non_finite_mismatches;
          if (reported++ < kMaxReported) failures << "\n  [" << t << ", " << s << "] got " << g << " ref " << r;
        }
        continue;
      }
      x.push_back(g);
      y.push_back(r);
      c.max_abs_error = std::max(c.max_abs_error, std::abs(g - r));
      c.max_abs_ref = std::max(c.max_abs_ref, std::abs(r));
    }
  }
  c.diff = calc_diff(x.data(), y.data(), x.size());
  c.passed = c.diff < max_diff && c.max_abs_error <= rel_max_abs * c.max_abs_ref && c.non_finite_mismatches == 0;
  std::ostringstream d;
  d << "indexer check over " << c.cells << " cells: calc_diff " << c.diff << " (limit " << max_diff
    << "), max abs error " << c.max_abs_error << " (limit " << rel_max_abs * c.max_abs_ref << " = "
    << rel_max_abs << " * max|ref| " << c.max_abs_ref << "), non-finite mismatches "
    << c.non_finite_mismatches << failures.str();
  c.description = d.str();
  return c;
}

TopkCheck check_topk(const int32_t* indices, int64_t indices_stride, int k, const double* scores,
                     int64_t ld_scores, int64_t num_rows, int64_t num_keys, const int32_t* ks,
                     const int32_t* ke, const TopkCheckOptions& options) {
  return check_topk_impl(indices, indices_stride, k, scores, ld_scores, num_rows, num_keys, ks, ke, options);
}

TopkCheck check_topk(const int32_t* indices, int64_t indices_stride, int k, const float* scores,
                     int64_t ld_scores, int64_t num_rows, int64_t num_keys, const int32_t* ks,
                     const int32_t* ke, const TopkCheckOptions& options) {
  return check_topk_impl(indices, indices_stride, k, scores, ld_scores, num_rows, num_keys, ks, ke, options);
}

double spec6_score_bound(double score_std, double max_abs_score) {
  // QK^T promoted every 128 elements (5 chains) errs in proportion to the scores' magnitude, about
  // 2^-11 of it, whatever their spread.
  const double by_magnitude = 5e-4 * max_abs_score + 1e-3;
  return score_std <= 3.0 ? std::max(2e-3, by_magnitude) : by_magnitude;
}

SparseMlaCheck check_sparse_mla(const SparseMlaOutputs& got, const std::vector<double>& ref_out,
                                const std::vector<double>& ref_lse,
                                const std::vector<double>& ref_max_logits, int64_t num_tokens,
                                int num_heads, int d_v, const SparseMlaTolerance& tol) {
  SparseMlaCheck c;
  const int64_t head_stride = got.out_head_stride != 0 ? got.out_head_stride : d_v;
  const int64_t token_stride = got.out_token_stride != 0 ? got.out_token_stride : num_heads * head_stride;
  const int64_t row_token_stride = got.row_token_stride != 0 ? got.row_token_stride : num_heads;
  std::ostringstream failures;
  int reported = 0;
  const bool by_spread = tol.row_score_std != nullptr && tol.row_score_max_abs != nullptr;
  double dot = 0.0, got_sq = 0.0, ref_sq = 0.0, err_sq = 0.0;
  // Each row's squared error and reference norm, judged once the rms row norm is known.
  std::vector<std::pair<double, double>> row_sq(static_cast<size_t>(num_tokens) * num_heads);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int h = 0; h < num_heads; ++h) {
      const int64_t th = t * num_heads + h;
      const uint16_t* o = got.out + t * token_stride + h * head_stride;
      const double* r = ref_out.data() + th * d_v;
      bool all_zero = true;
      double row_err_sq = 0.0, row_ref_sq = 0.0;
      for (int c_ = 0; c_ < d_v; ++c_) {
        const double g = bf16_to_float(o[c_]);
        if (!std::isfinite(g)) {
          ++c.non_finite_out;
          continue;
        }
        all_zero = all_zero && g == 0.0;
        dot += g * r[c_];
        got_sq += g * g;
        row_ref_sq += r[c_] * r[c_];
        row_err_sq += (g - r[c_]) * (g - r[c_]);
      }
      ref_sq += row_ref_sq;
      err_sq += row_err_sq;
      row_sq[static_cast<size_t>(th)] = {row_err_sq, row_ref_sq};
      const int64_t row = t * row_token_stride + h;
      const double lse = got.lse != nullptr ? got.lse[row] : ref_lse[th];
      const double max_logit = got.max_logits != nullptr ? got.max_logits[row] : ref_max_logits[th];
      if (std::isinf(ref_lse[th]) && ref_lse[th] > 0) {
        ++c.empty_rows;
        const bool ok = all_zero && std::isinf(lse) && lse > 0 && std::isinf(max_logit) && max_logit < 0;
        if (!ok) {
          ++c.convention_mismatches;
          if (reported++ < kMaxReported) {
            failures << "\n  [" << t << ", " << h << "] no valid key: out all zero " << all_zero << ", lse "
                     << lse << ", max_logits " << max_logit;
          }
        }
        continue;
      }
      const double lse_err = std::abs(lse - ref_lse[th]);
      const double max_err = std::abs(max_logit - ref_max_logits[th]);
      // NaN errors must fail, hence the comparisons written as "within".
      const double lse_limit = by_spread ? spec6_score_bound((*tol.row_score_std)[th], (*tol.row_score_max_abs)[th])
                                         : tol.max_lse_error;
      const double max_limit = by_spread ? lse_limit
                                         : tol.max_max_logits_error + 1e-5 * std::abs(ref_max_logits[th]);
      const bool lse_ok = lse_err <= lse_limit;
      const bool max_ok = max_err <= max_limit;  // 0 when max_logits is not given (ref stands in)
      c.worst_bound_ratio = std::max({c.worst_bound_ratio, std::isnan(lse_err) ? INFINITY : lse_err / lse_limit,
                                      std::isnan(max_err) ? INFINITY : max_err / max_limit});
      c.max_lse_error = std::max(c.max_lse_error, std::isnan(lse_err) ? INFINITY : lse_err);
      c.max_max_logits_error = std::max(c.max_max_logits_error, std::isnan(max_err) ? INFINITY : max_err);
      if (!lse_ok || !max_ok) {
        ++c.lse_failures;
        if (reported++ < kMaxReported) {
          failures << "\n  [" << t << ", " << h << "] lse " << lse << " vs " << ref_lse[th] << ", max_logits "
                   << max_logit << " vs " << ref_max_logits[th];
        }
      }
    }
  }
  const double floor_sq = kRowNormFloor * kRowNormFloor * ref_sq / static_cast<double>(std::max<size_t>(row_sq.size(), 1));
  for (size_t th = 0; th < row_sq.size(); ++th) {
    const auto [row_err_sq, row_ref_sq] = row_sq[th];
    if (row_ref_sq == 0.0 || row_ref_sq < floor_sq) continue;
    const double e = std::sqrt(row_err_sq / row_ref_sq);
    if (e > c.worst_row_rel_l2) {
      c.worst_row_rel_l2 = e;
      c.worst_row = static_cast<int64_t>(th);
    }
  }
  if (ref_sq == 0.0 && got_sq == 0.0) {
    c.rel_l2 = 0.0;
    c.cosine = 1.0;
  } else {
    c.rel_l2 = ref_sq == 0.0 ? INFINITY : std::sqrt(err_sq / ref_sq);
    c.cosine = (ref_sq == 0.0 || got_sq == 0.0) ? 0.0 : dot / std::sqrt(ref_sq * got_sq);
  }
  c.passed = c.rel_l2 <= tol.max_rel_l2 && c.cosine >= tol.min_cosine && c.convention_mismatches == 0 &&
             c.non_finite_out == 0 && c.lse_failures == 0 && c.worst_row_rel_l2 <= tol.max_row_rel_l2;
  std::ostringstream d;
  d << "sparse MLA check over " << num_tokens << " x " << num_heads << " rows: rel L2 " << c.rel_l2
    << " (limit " << tol.max_rel_l2 << "), cosine " << c.cosine << " (min " << tol.min_cosine
    << "), worst row rel L2 " << c.worst_row_rel_l2 << " (limit " << tol.max_row_rel_l2 << ", row "
    << c.worst_row << "), max lse error " << c.max_lse_error << " (limit ";
  if (by_spread) {
    d << "per row by its score spread";
  } else {
    d << tol.max_lse_error;
  }
  d << "), max max_logits error "
    << c.max_max_logits_error << ", empty rows " << c.empty_rows << " (convention mismatches "
    << c.convention_mismatches << "), non-finite out " << c.non_finite_out << ", lse/max failures "
    << c.lse_failures << " (worst error / limit " << c.worst_bound_ratio << ")" << failures.str();
  c.description = d.str();
  return c;
}

RoundingCheck check_against_rounding(const SparseMlaOutputs& got, const std::vector<double>& ref_q_out,
                                     const std::vector<double>& ref_q_lse, const std::vector<double>& ref_q_max_logits,
                                     const std::vector<double>& ref_0_out, const std::vector<double>& ref_0_lse,
                                     const std::vector<double>& ref_0_max_logits, int64_t num_tokens, int num_heads,
                                     int d_v, const RoundingTolerance& tol) {
  RoundingCheck c;
  SparseMlaTolerance unbounded;  // the kernel's numbers against Rq, limits applied below
  unbounded.max_rel_l2 = INFINITY;
  unbounded.max_row_rel_l2 = INFINITY;
  unbounded.min_cosine = -1.0;
  unbounded.max_lse_error = INFINITY;
  unbounded.max_max_logits_error = INFINITY;
  c.kernel = check_sparse_mla(got, ref_q_out, ref_q_lse, ref_q_max_logits, num_tokens, num_heads, d_v, unbounded);
  double q_sq = 0.0, zero_sq = 0.0, diff_sq = 0.0;
  for (size_t i = 0; i < ref_q_out.size(); ++i) {
    q_sq += ref_q_out[i] * ref_q_out[i];
    zero_sq += ref_0_out[i] * ref_0_out[i];
    diff_sq += (ref_q_out[i] - ref_0_out[i]) * (ref_q_out[i] - ref_0_out[i]);
  }
  for (size_t i = 0; i < ref_q_lse.size(); ++i) {
    if (!std::isfinite(ref_q_lse[i]) || !std::isfinite(ref_0_lse[i])) continue;  // no valid key
    c.rounding_max_lse_error = std::max(c.rounding_max_lse_error, std::abs(ref_q_lse[i] - ref_0_lse[i]));
    c.rounding_max_max_logits_error =
        std::max(c.rounding_max_max_logits_error, std::abs(ref_q_max_logits[i] - ref_0_max_logits[i]));
  }
  c.rounding_rel_l2 = zero_sq > 0.0 ? std::sqrt(diff_sq / zero_sq) : 0.0;
  const double kernel_err = c.kernel.rel_l2 * std::sqrt(q_sq);
  c.out_error_ratio = diff_sq > 0.0 ? kernel_err / std::sqrt(diff_sq) : (kernel_err == 0.0 ? 0.0 : INFINITY);
  c.lse_limit = tol.lse_fraction * c.rounding_max_lse_error + tol.lse_floor;
  c.max_logits_limit = tol.lse_fraction * c.rounding_max_max_logits_error + tol.lse_floor;
  c.passed = c.kernel.rel_l2 <= tol.max_rel_l2 && c.kernel.cosine >= tol.min_cosine &&
             c.kernel.worst_row_rel_l2 <= tol.max_row_rel_l2 && c.kernel.max_lse_error <= c.lse_limit && c.kernel.max_max_logits_error <= c.max_logits_limit &&
             c.kernel.convention_mismatches == 0 && c.kernel.non_finite_out == 0;
  std::ostringstream d;
  d << "against the rounding of the inputs over " << num_tokens << " x " << num_heads << " rows: out rel L2 "
    << c.kernel.rel_l2 << " (limit " << tol.max_rel_l2 << "; " << c.out_error_ratio << "x the rounding's "
    << c.rounding_rel_l2 << "), worst row rel L2 " << c.kernel.worst_row_rel_l2 << " (limit "
    << tol.max_row_rel_l2 << "), cosine " << c.kernel.cosine << " (min "
    << tol.min_cosine << "), max lse error " << c.kernel.max_lse_error << " (limit " << c.lse_limit
    << ", rounding " << c.rounding_max_lse_error << "), max max_logits error " << c.kernel.max_max_logits_error
    << " (limit " << c.max_logits_limit << ", rounding " << c.rounding_max_max_logits_error << "), "
    << c.kernel.convention_mismatches << " convention mismatches, " << c.kernel.non_finite_out << " non-finite";
  c.description = d.str();
  return c;
}

}  // namespace fp8dsa::tools
