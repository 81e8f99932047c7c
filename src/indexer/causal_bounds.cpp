// Causal ks/ke for a ragged prefill batch with cached prefixes (SPEC section 1, causal guard).
#include "fp8dsa/indexer.h"

#include <limits>

#include "core/no_throw.h"
#include "core/validate.h"

namespace fp8dsa {

static Status build_causal_bounds_unguarded(std::span<const SequenceLayout> sequences, int32_t* ks,
                                           int32_t* ke, int64_t* num_tokens, int64_t* num_keys) {
  using detail::concat;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (num_tokens == nullptr || num_keys == nullptr) {
    return invalid_argument("build_causal_bounds: num_tokens and num_keys must not be null");
  }
  // First pass: check everything before writing anything, so a rejected call leaves ks/ke as is.
  int64_t total_tokens = 0;
  int64_t total_keys = 0;
  for (size_t b = 0; b < sequences.size(); ++b) {
    const SequenceLayout& seq = sequences[b];
    if (seq.new_tokens < 0 || seq.new_tokens > kMax) {
      return invalid_argument(concat("build_causal_bounds: sequences[", b, "].new_tokens (",
                                     seq.new_tokens, ") must be in [0, ", kMax, "]"));
    }
    if (seq.cached_keys < 0 || seq.cached_keys > kMax) {
      return invalid_argument(concat("build_causal_bounds: sequences[", b, "].cached_keys (",
                                     seq.cached_keys, ") must be in [0, ", kMax, "]"));
    }
    // Each term is <= INT32_MAX and the totals stay <= INT32_MAX, so these sums cannot overflow.
    total_tokens += seq.new_tokens;
    total_keys += seq.cached_keys + seq.new_tokens;
    if (total_tokens > kMax) {
      return invalid_argument(concat("build_causal_bounds: total new tokens (", total_tokens,
                                     " through sequences[", b, "]) exceeds ", kMax));
    }
    if (total_keys > kMax) {
      return invalid_argument(concat("build_causal_bounds: total keys (", total_keys,
                                     " through sequences[", b, "]) exceeds ", kMax,
                                     " (key rows are int32)"));
    }
  }
  if (total_tokens > 0 && (ks == nullptr || ke == nullptr)) {
    return invalid_argument(concat("build_causal_bounds: ks and ke must not be null (",
                                   total_tokens, " tokens)"));
  }

  int64_t token = 0;
  int64_t base = 0;
  for (const SequenceLayout& seq : sequences) {
    for (int64_t i = 0; i < seq.new_tokens; ++i, ++token) {
      ks[token] = static_cast<int32_t>(base);
      ke[token] = static_cast<int32_t>(base + seq.cached_keys + i + 1);
    }
    base += seq.cached_keys + seq.new_tokens;
  }
  *num_tokens = total_tokens;
  *num_keys = total_keys;
  return Status::ok();
}

Status build_causal_bounds(std::span<const SequenceLayout> sequences, int32_t* ks, int32_t* ke,
                           int64_t* num_tokens, int64_t* num_keys) {
  return detail::no_throw("build_causal_bounds", [&] {
    return build_causal_bounds_unguarded(sequences, ks, ke, num_tokens, num_keys);
  });
}

}  // namespace fp8dsa
