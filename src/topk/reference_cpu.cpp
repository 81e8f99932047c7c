// The top-k reference (SPEC 2): exact selection per row, multi-threaded over rows.
#include "topk/reference_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/no_throw.h"
#include "core/parallel_for.h"
#include "topk/page_table.h"

namespace fp8dsa::reference {
namespace {

struct Candidate {
  float score;
  int32_t key;
};

// Strict weak order "a ranks above b": larger score first, NaN below everything (including -inf),
// equal scores (and NaN pairs) by ascending key so that the reference is deterministic.
bool ranks_above(const Candidate& a, const Candidate& b) {
  const bool a_nan = std::isnan(a.score);
  const bool b_nan = std::isnan(b.score);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a.score != b.score) return a.score > b.score;
  return a.key < b.key;
}

}  // namespace

int32_t topk_page_transform(const TopkParams& p, int64_t row, int32_t index) {
  return detail::topk::page_table_transform(p, row, index);
}

namespace {

// Always returns the selection in descending score order (ties by ascending key), which satisfies
// both the sorted and the unsorted contract; slots past the selection are -1 and columns
// [k, indices_stride) are untouched.
Status topk_cpu_unguarded(const TopkParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const TopkParams p = params.resolved();
  parallel_for(0, p.num_rows, [&](int64_t t) {
    const int64_t lo = std::clamp<int64_t>(p.ks[t], 0, p.num_keys);
    const int64_t hi = std::max(lo, std::clamp<int64_t>(p.ke[t], 0, p.num_keys));
    const float* row = p.logits + t * p.logits_stride;
    std::vector<Candidate> candidates;
    candidates.reserve(static_cast<size_t>(hi - lo));
    for (int64_t s = lo; s < hi; ++s) candidates.push_back({row[s], static_cast<int32_t>(s)});

    const int64_t selected = std::min<int64_t>(p.k, hi - lo);
    auto first = candidates.begin();
    auto middle = first + selected;
    if (middle != candidates.end()) std::nth_element(first, middle, candidates.end(), ranks_above);
    std::sort(first, middle, ranks_above);

    int32_t* out = p.indices + t * p.indices_stride;
    for (int64_t i = 0; i < selected; ++i) {
      const int32_t key = candidates[static_cast<size_t>(i)].key;
      out[i] = p.page_table != nullptr ? topk_page_transform(p, t, key) : key;
    }
    std::fill(out + selected, out + p.k, -1);
  });
  return Status::ok();
}

}  // namespace

Status topk_cpu(const TopkParams& params) {
  return detail::no_throw("topk reference", [&] { return topk_cpu_unguarded(params); });
}

}  // namespace fp8dsa::reference
