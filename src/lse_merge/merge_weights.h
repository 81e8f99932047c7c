// The per-row arithmetic of lse_merge (fp8dsa/lse_merge.h), host and device, so that the GPU
// kernel and the CPU reference compute the same thing (in f32 and f64).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace fp8dsa::detail::lse_merge {

// A part counts for a row when its lse is finite (+inf: no valid key, SPEC 4).
template <class F>
FP8DSA_HOST_DEVICE bool part_counts(F lse_part) {
  return lse_part > -INFINITY && lse_part < INFINITY;
}

// The merged lse of one row from its parts' lse (lse_parts[r * stride], r < num_parts): the max of
// the counting parts plus log of the sum of exp(lse_r - max); +inf when no part counts.
// NaN when a part's lse is NaN (a NaN score reached the row in that part).
template <class F>
FP8DSA_HOST_DEVICE F merged_lse(const float* lse_parts, int64_t stride, int num_parts) {
  F m = -INFINITY;
  for (int r = 0; r < num_parts; ++r) {
    const F l = lse_parts[r * stride];
    if (l != l) return l;
    if (part_counts(l) && l > m) m = l;
  }
  if (m == -INFINITY) return INFINITY;
  F sum = 0;
  for (int r = 0; r < num_parts; ++r) {
    const F l = lse_parts[r * stride];
    if (part_counts(l)) sum += exp(l - m);
  }
  return m + log(sum);
}

// The merged max_logits of one row: the max over the parts, NaN when a part's is NaN (fmax would
// drop it).
FP8DSA_HOST_DEVICE float merged_max_logit(const float* max_logits_parts, int64_t stride, int num_parts) {
  float m = -INFINITY;
  for (int r = 0; r < num_parts; ++r) {
    const float x = max_logits_parts[r * stride];
    if (x != x) return x;
    m = x > m ? x : m;
  }
  return m;
}

// Part r's weight in the merged out: exp(lse_r - lse), 0 for a part that does not count.
template <class F>
FP8DSA_HOST_DEVICE F part_weight(F lse_part, F lse) {
  return part_counts(lse_part) ? exp(lse_part - lse) : F{0};
}

// The sink factor exp(lse) / (exp(lse) + exp(sink)) = 1 / (1 + exp(sink - lse)), 0 for a row with
// no valid key (lse = +inf).
template <class F>
FP8DSA_HOST_DEVICE F sink_factor(F lse, F sink) {
  if (lse == INFINITY) return F{0};
  return F{1} / (F{1} + exp(sink - lse));
}

}  // namespace fp8dsa::detail::lse_merge
