#include "cpu_time_limit.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "fp8dsa/cpu_time.h"

namespace fp8dsa::python {
namespace {

int64_t range_length(const IndexerParams& p, int64_t t) {
  const int64_t lo = std::clamp<int64_t>(p.ks[t], 0, p.num_keys);
  const int64_t hi = std::clamp<int64_t>(p.ke[t], 0, p.num_keys);
  return std::max<int64_t>(hi - lo, 0);
}

}  // namespace

double indexer_pairs(const IndexerParams& p) {
  double pairs = 0.0;
  for (int64_t t = 0; t < p.num_tokens; ++t) pairs += static_cast<double>(range_length(p, t));
  return pairs;
}

double selected_keys(const IndexerParams& p, int topk) {
  double keys = 0.0;
  for (int64_t t = 0; t < p.num_tokens; ++t) keys += static_cast<double>(std::min<int64_t>(range_length(p, t), topk));
  return keys;
}

double attention_keys(const SparseMlaParams& p) {
  const int64_t stride = p.indices_stride != 0 ? p.indices_stride : p.topk;
  double keys = 0.0;
  for (int64_t t = 0; t < p.num_tokens; ++t) {
    const int64_t length = p.topk_length ? std::clamp<int64_t>(p.topk_length[t], 0, p.topk) : p.topk;
    const int32_t* row = p.indices + t * stride;
    for (int64_t j = 0; j < length; ++j) keys += row[j] >= 0 && row[j] < p.num_kv ? 1.0 : 0.0;
  }
  return keys;
}

void refuse_past_time_limit(const ArrayChecker& arrays, double indexer_flops, double sparse_mla_flops,
                            double max_seconds, const char* gpu_call) {
  const reference::CpuTimeEstimate estimate = reference::cpu_time_estimate(indexer_flops, sparse_mla_flops);
  if (!(estimate.seconds > max_seconds)) return;
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%g", max_seconds);
  arrays.fail("the CPU reference would take " + estimate.to_string() + ", past max_seconds (" + limit +
              "); pass a larger max_seconds, or max_seconds=None to run it however long it takes (Ctrl-C "
              "stops it), or run " + gpu_call + " on a GPU");
}

}  // namespace fp8dsa::python
