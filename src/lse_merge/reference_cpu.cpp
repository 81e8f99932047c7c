// lse_merge's reference (fp8dsa/lse_merge.h): f64 on the bf16 parts, one (token, head) row at a time.
#include <cmath>
#include <vector>

#include "core/no_throw.h"
#include "core/parallel_for.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/lse_merge.h"
#include "lse_merge/merge_weights.h"

namespace fp8dsa::reference {

static Status lse_merge_cpu_unguarded(const LseMergeParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const LseMergeParams p = params.resolved();
  const int64_t rows = p.num_tokens * p.num_heads;
  const auto* parts = static_cast<const uint16_t*>(p.out_parts);
  auto* out = static_cast<uint16_t*>(p.out);
  parallel_for(0, rows, [&](int64_t row) {
    const int64_t t = row / p.num_heads, head = row % p.num_heads;
    const double lse = detail::lse_merge::merged_lse<double>(p.lse_parts + row, rows, p.num_parts);
    std::vector<double> acc(static_cast<size_t>(p.d_v), 0.0);
    for (int r = 0; r < p.num_parts; ++r) {
      const double w = detail::lse_merge::part_weight<double>(p.lse_parts[r * rows + row], lse);
      if (w == 0.0) continue;
      const uint16_t* v = parts + r * p.part_stride + t * p.token_stride + head * p.head_stride;
      for (int c = 0; c < p.d_v; ++c) acc[c] += w * double{bf16_to_float(v[c])};
    }
    const double sink = p.attn_sink != nullptr ? double{p.attn_sink[head]} : -INFINITY;
    const double factor = detail::lse_merge::sink_factor<double>(lse, sink);
    uint16_t* o = out + t * p.out_token_stride + head * p.out_head_stride;
    for (int c = 0; c < p.d_v; ++c) o[c] = float_to_bf16(static_cast<float>(acc[c] * factor));
    p.lse[row] = static_cast<float>(lse);
    if (p.max_logits != nullptr) {
      p.max_logits[row] = detail::lse_merge::merged_max_logit(p.max_logits_parts + row, rows, p.num_parts);
    }
  });
  return Status::ok();
}

Status lse_merge_cpu(const LseMergeParams& params) {
  return detail::no_throw("lse_merge reference", [&] { return lse_merge_cpu_unguarded(params); });
}

}  // namespace fp8dsa::reference
