// The SPEC 6 accuracy checks, shared by the CPU and GPU tests. Each returns the numbers, a pass
// flag and a readable description (print it on failure: EXPECT_TRUE(c.passed) << c.description).
// All pointers are host pointers; copy device outputs back first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fp8dsa::tools {

// DeepGEMM's similarity metric 1 - 2*sum(x*y) / sum(x*x + y*y) (0 for identical inputs; defined
// as 0 when both are all zero).
double calc_diff(const double* x, const double* y, size_t n);

struct IndexerCheck {
  int64_t cells = 0;               // cells compared (inside the clamped [ks, ke) of each row)
  double diff = 0.0;               // calc_diff over the finite reference cells
  double max_abs_error = 0.0;      // over the finite reference cells
  double max_abs_ref = 0.0;
  int64_t non_finite_mismatches = 0;  // a non-finite reference cell not matched exactly, or a
                                      // finite one answered with inf/NaN
  bool passed = false;
  std::string description;
};

// got: [T, logits_stride] f32 logits of the kernel under test; ref: [T, N] packed f64 reference (as from
// reference::indexer_logits_cpu_f64). Passes when diff < max_diff, max_abs_error <=
// rel_max_abs * max_abs_ref and there is no non-finite mismatch. Cells outside each row's range
// are not compared (check fill_masked separately).
IndexerCheck check_indexer_logits(const float* got, int64_t logits_stride, const double* ref, int64_t num_tokens,
                                  int64_t num_keys, const int32_t* ks, const int32_t* ke,
                                  double max_diff = 1e-5, double rel_max_abs = 1e-3);

struct TopkCheckOptions {
  double rel_tol = 1e-5;  // two scores a, b are "tied" when |a - b| <= rel_tol * max(|a|, |b|) + abs_tol
  double abs_tol = 0.0;
  bool sorted = false;              // also require descending reference score along the row
  bool padding_at_end = true;       // the selected keys fill the first min(k, ke - ks) slots
};

struct TopkCheck {
  int64_t rows = 0;
  int64_t bad_rows = 0;
  int64_t out_of_range = 0;     // a selected index outside the row's clamped [ks, ke)
  int64_t duplicates = 0;       // a selected index repeated within a row
  int64_t wrong_count = 0;      // rows whose number of non -1 entries is not min(k, ke - ks)
  int64_t misplaced_padding = 0;  // rows with -1 before a selected index (padding_at_end)
  int64_t wrong_selection = 0;  // rows whose selected scores differ from the exact top-k beyond a tie
  int64_t order_violations = 0; // rows not in descending score order (sorted)
  bool passed = false;
  std::string description;      // the counts and the first few failing rows
};

// indices: [T, indices_stride] i32 under test (absolute key rows, no page-table transform); scores:
// [T, ld_scores] the reference scores the selection is judged by (the f64 reference logits, or the
// f32 logits that were given to the top-k). Checks, per row, that exactly min(k, ke - ks) slots hold
// distinct indices inside the clamped [ks, ke), the rest -1, and that the sorted scores of the
// selection match those of the exact top-k (NaN lowest) position by position up to a tie.
TopkCheck check_topk(const int32_t* indices, int64_t indices_stride, int k, const double* scores,
                     int64_t ld_scores, int64_t num_rows, int64_t num_keys, const int32_t* ks,
                     const int32_t* ke, const TopkCheckOptions& options = {});
TopkCheck check_topk(const int32_t* indices, int64_t indices_stride, int k, const float* scores,
                     int64_t ld_scores, int64_t num_rows, int64_t num_keys, const int32_t* ks,
                     const int32_t* ke, const TopkCheckOptions& options = {});

// Host views of a sparse MLA kernel's outputs (strides in elements; 0 = packed).
struct SparseMlaOutputs {
  const uint16_t* out = nullptr;  // [T, h, d_v] bf16
  int64_t out_token_stride = 0;   // 0 = h * out_head_stride
  int64_t out_head_stride = 0;    // 0 = d_v
  const float* lse = nullptr;         // [T, h]; not compared when null
  const float* max_logits = nullptr;  // [T, h]; optional
  int64_t row_token_stride = 0;       // of lse and max_logits; 0 = h (packed)
};

struct SparseMlaTolerance {
  double max_rel_l2 = 2.5e-2;
  double min_cosine = 0.999;
  // The worst (token, head) row's relative L2 error of out, over the rows whose reference norm is
  // at least kRowNormFloor of the rms row norm: one wrong row among thousands passes the whole-tensor
  // bound, not this one. (e4m3 P errs by up to 2^-4 a key, so a row of a few dominant keys may err
  // by a few percent; a row from the wrong keys or head errs by order 1.)
  double max_row_rel_l2 = 0.25;
  double max_lse_error = 2e-3;         // absolute
  double max_max_logits_error = 2e-3;  // absolute, plus 1e-5 * |ref|
  // SPEC 6's bound on lse and max_logits by the spread of each row's scores (reference::
  // SparseMlaScoreSpread, one entry per row): when set it replaces the two limits above.
  const std::vector<double>* row_score_std = nullptr;
  const std::vector<double>* row_score_max_abs = nullptr;
};

// SPEC 6 (e4m3-exact inputs): 5e-4 * max|s| + 1e-3, and at least 2e-3 where the scores' standard
// deviation across keys is <= 3.
double spec6_score_bound(double score_std, double max_abs_score);

struct SparseMlaCheck {
  double rel_l2 = 0.0;   // ||got - ref|| / ||ref|| over all of out (0 when both are zero)
  double cosine = 1.0;   // <got, ref> / (||got|| ||ref||) (1 when both are zero)
  double max_lse_error = 0.0;
  double max_max_logits_error = 0.0;
  int64_t empty_rows = 0;              // (token, head) with no valid key in the reference
  int64_t convention_mismatches = 0;   // such a row without out == 0, lse == +inf, max == -inf
  int64_t non_finite_out = 0;          // NaN / inf in out
  int64_t lse_failures = 0;            // finite-reference rows with lse (or max_logits) out of tolerance
  double worst_bound_ratio = 0.0;      // max over rows of error / limit (lse and max_logits; <= 1 passes)
  double worst_row_rel_l2 = 0.0;       // of out, over the rows SparseMlaTolerance::max_row_rel_l2 judges
  int64_t worst_row = -1;              // its t * h + head
  bool passed = false;
  std::string description;
};

// Rows whose reference norm is below this fraction of the rms row norm are not judged one by one.
inline constexpr double kRowNormFloor = 1e-3;

// ref_out [T, h, d_v], ref_lse [T, h], ref_max_logits [T, h]: from reference::sparse_mla_cpu_f64.
// max_logits is compared only when got.max_logits is set.
SparseMlaCheck check_sparse_mla(const SparseMlaOutputs& got, const std::vector<double>& ref_out,
                                const std::vector<double>& ref_lse,
                                const std::vector<double>& ref_max_logits, int64_t num_tokens,
                                int num_heads, int d_v, const SparseMlaTolerance& tolerance = {});

// SPEC 6's bound judged against the rounding of the inputs: Rq is the f64 reference on the values
// the kernel was given (rounded to its input format), R0 the f64 reference on the values before that
// rounding. The kernel's own score error must be small next to the rounding's:
//   max |lse - lse_q| <= 0.1 max |lse_q - lse_0| + 2e-3, and the same for max_logits;
// out keeps its absolute bound against Rq (relative L2 <= 2.5e-2, cosine >= 0.999), and its error
// ratio ||out - Rq|| / ||Rq - R0|| is reported: on flat attention over realistic values the e4m3
// rounding of P alone puts it at 1.6-1.75 for every FP8 kernel measured (ours, SGLang's Q8KV8), so
// a bound of 0.35 on it would rule out e4m3 P (bench/journal/2026-12-01.md, sparse MLA v3 step 1).
struct RoundingTolerance {
  double max_rel_l2 = 2.5e-2;
  double min_cosine = 0.999;
  double max_row_rel_l2 = 0.25;  // as SparseMlaTolerance's, against Rq
  double lse_fraction = 0.1;
  double lse_floor = 2e-3;
};

struct RoundingCheck {
  SparseMlaCheck kernel;          // the kernel against Rq (its numbers; its own limits are not used)
  double rounding_rel_l2 = 0.0;   // ||Rq - R0|| / ||R0||
  double out_error_ratio = 0.0;   // ||out - Rq|| / ||Rq - R0|| (reported, not bounded)
  double rounding_max_lse_error = 0.0;         // max |lse_q - lse_0| over rows with a valid key
  double rounding_max_max_logits_error = 0.0;  // the same for max_logits
  double lse_limit = 0.0;         // lse_fraction * rounding_max_lse_error + lse_floor
  double max_logits_limit = 0.0;
  bool passed = false;
  std::string description;
};

// ref_q_* and ref_0_* as from reference::sparse_mla_cpu_f64 and sparse_mla_cpu_f64_unrounded on the
// same tokens as got.
RoundingCheck check_against_rounding(const SparseMlaOutputs& got, const std::vector<double>& ref_q_out,
                                     const std::vector<double>& ref_q_lse, const std::vector<double>& ref_q_max_logits,
                                     const std::vector<double>& ref_0_out, const std::vector<double>& ref_0_lse,
                                     const std::vector<double>& ref_0_max_logits, int64_t num_tokens, int num_heads,
                                     int d_v, const RoundingTolerance& tolerance = {});

}  // namespace fp8dsa::tools
