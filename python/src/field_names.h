// The library's messages name its params fields (q_token_stride, logits_stride, attention.num_tokens); a
// Python caller knows only the arguments they come from. Each stage's table maps its fields to the
// words of those arguments ("q's stride in dimension 0"), and in_argument_terms() rewrites a
// message with it, so that the library's checks stay the one source of the rules.
#pragma once

#include <string>
#include <vector>

#include "fp8dsa/status.h"
#include "stage_params.h"

namespace fp8dsa::python {

struct FieldName {
  const char* field;  // as the library's messages spell it
  std::string words;  // what the Python caller passed
};
using FieldNames = std::vector<FieldName>;

// `status` with every whole-word field of `names` in its message replaced by its words.
Status in_argument_terms(const Status& status, const FieldNames& names);

// IndexerParams from q [T, H, D], k [N, D], k_scale, weights, ks, ke and logits (names as given).
FieldNames indexer_field_names(const IndexerArrayNames& names);
// TopkParams from logits [T, N] (or, fused, the indexer's q and k), out [T, k] and page_table [B, P].
FieldNames topk_field_names(const char* rows_from, const char* keys_from);
// SparseMlaParams from q [T, h, d_qk], kv [N, d_qk], indices [T, topk] and out [T, h, d_v].
FieldNames attention_field_names();
// LseMergeParams from out_parts [R, T, h, d_v] and out [T, h, d_v].
FieldNames lse_merge_field_names();

}  // namespace fp8dsa::python
