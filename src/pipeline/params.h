// Internal: the part of the PrefillParams checks that the workspace size depends on.
#pragma once

#include "fp8dsa/pipeline.h"

namespace fp8dsa::detail::pipeline {

// topk and the indexer's num_tokens / num_keys, with the messages validate() gives for them.
Status validate_shape(const PrefillParams& params);

// Whether prefill() runs the fused score + top-k for these (validated) params: when fused is set,
// or when the workspace is too small for the unfused path's logits but holds the fused path's needs
// and the indexer kernel is kAuto or kQResident (pipeline.cpp).
bool runs_fused(const PrefillParams& params);

// The row stride of the workspace logits: num_keys padded to the indexer's 16-byte row alignment.
// num_keys in [0, INT32_MAX] (validate_shape), so the sum cannot overflow.
inline int64_t logits_ldl(int64_t num_keys) {
  constexpr int64_t kLogitsRowAlign = 4;
  return (num_keys + kLogitsRowAlign - 1) / kLogitsRowAlign * kLogitsRowAlign;
}

}  // namespace fp8dsa::detail::pipeline
