// The prefill reference (SPEC 5): the three CPU references in sequence, each stage's output in a
// host buffer of its own. The fused option has no CPU form of its own: by SPEC 3 it must give the
// same index sets as the unfused path, so this one reference serves both.
#include <algorithm>
#include <vector>

#include "fp8dsa/pipeline.h"

namespace fp8dsa::reference {

Status prefill_cpu(const PrefillParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const int64_t num_tokens = params.indexer.num_tokens;
  const int64_t num_keys = params.indexer.num_keys;
  const int k = params.topk;

  // Rows padded to the indexer's 16-byte row alignment; never empty, so the pointers are non-null.
  const int64_t ldl = std::max<int64_t>(4, (num_keys + 3) / 4 * 4);
  std::vector<float> logits(static_cast<size_t>(std::max<int64_t>(1, num_tokens) * ldl));
  IndexerParams indexer = params.indexer;
  indexer.logits = logits.data();
  indexer.ldl = ldl;
  indexer.fill_masked = false;  // top-k reads only [ks, ke)
  FP8DSA_RETURN_IF_ERROR(indexer_logits_cpu(indexer));

  std::vector<int32_t> indices(static_cast<size_t>(std::max<int64_t>(1, num_tokens * k)));
  TopkParams topk;
  topk.num_rows = num_tokens;
  topk.num_keys = num_keys;
  topk.logits = logits.data();
  topk.ldl = indexer.ldl;
  topk.ks = indexer.ks;
  topk.ke = indexer.ke;
  topk.k = k;
  topk.indices = indices.data();
  topk.ld_indices = k;
  FP8DSA_RETURN_IF_ERROR(topk_cpu(topk));

  SparseMlaParams attention = params.attention;
  attention.indices = indices.data();
  attention.topk = k;
  attention.indices_stride = k;
  return sparse_mla_cpu(attention);
}

}  // namespace fp8dsa::reference
