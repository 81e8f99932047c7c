// The prefill reference (SPEC 5): the three CPU references in sequence, each stage's output in a
// host buffer of its own. The fused option has no CPU form of its own: by SPEC 3 it must give the
// same index sets as the unfused path, so this one reference serves both.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/no_throw.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/pipeline.h"

namespace fp8dsa::reference {
namespace {

// Tokens go through indexer and top-k a block at a time, so that the logits buffer stays near
// kLogitsBlockFloats (64 MB) whatever T; each cell and row is computed independently, so the
// result does not depend on the block size.
constexpr int64_t kLogitsBlockFloats = int64_t{1} << 24;
constexpr int64_t kMinTokensPerBlock = 64;

Status prefill_cpu_unguarded(const PrefillParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const IndexerParams index = params.indexer.resolved();
  const int64_t num_tokens = index.num_tokens;
  const int64_t num_keys = index.num_keys;
  const int k = params.topk;

  // Rows padded to the indexer's 16-byte row alignment; never empty, so the pointers are non-null.
  const int64_t logits_stride = std::max(kLogitsRowMultiple, min_logits_stride(num_keys));
  const int64_t block = std::min(std::max<int64_t>(1, num_tokens),
                                 std::max(kMinTokensPerBlock, kLogitsBlockFloats / logits_stride));
  std::vector<float> logits(static_cast<size_t>(block * logits_stride));
  std::vector<int32_t> indices(static_cast<size_t>(std::max<int64_t>(1, num_tokens * k)));
  const int64_t q_bytes = dtype_bytes(index.q_dtype);
  for (int64_t t0 = 0; t0 < num_tokens; t0 += block) {
    const int64_t rows = std::min(block, num_tokens - t0);
    IndexerParams indexer = index;
    indexer.num_tokens = rows;
    indexer.q = static_cast<const uint8_t*>(index.q) + t0 * index.q_token_stride * q_bytes;
    indexer.w = index.w + t0 * index.w_token_stride;
    indexer.ks = index.ks + t0;
    indexer.ke = index.ke + t0;
    indexer.logits = logits.data();
    indexer.logits_stride = logits_stride;
    indexer.fill_masked = false;  // top-k reads only [ks, ke)
    FP8DSA_RETURN_IF_ERROR(indexer_logits_cpu(indexer));

    TopkParams topk;
    topk.num_rows = rows;
    topk.num_keys = num_keys;
    topk.logits = logits.data();
    topk.logits_stride = logits_stride;
    topk.ks = indexer.ks;
    topk.ke = indexer.ke;
    topk.k = k;
    topk.indices = indices.data() + t0 * k;
    topk.indices_stride = k;
    FP8DSA_RETURN_IF_ERROR(topk_cpu(topk));
  }

  SparseMlaParams attention = params.attention;
  attention.indices = indices.data();
  attention.topk = k;
  attention.indices_stride = k;
  return sparse_mla_cpu(attention);
}

}  // namespace

Status prefill_cpu(const PrefillParams& params) {
  return detail::no_throw("prefill reference", [&] { return prefill_cpu_unguarded(params); });
}

}  // namespace fp8dsa::reference
