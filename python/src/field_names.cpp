#include "field_names.h"

#include <cctype>

namespace fp8dsa::python {
namespace {

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// "q's", "logits'".
std::string possessive(const std::string& name) { return name + (name.back() == 's' ? "'" : "'s"); }

std::string stride(const std::string& array, int dim) {
  return possessive(array) + " stride in dimension " + std::to_string(dim);
}

}  // namespace

Status in_argument_terms(const Status& status, const FieldNames& names) {
  if (status.is_ok()) return status;
  const std::string& message = status.message();
  std::string rewritten;
  size_t i = 0;
  while (i < message.size()) {
    if (!is_word(message[i])) {
      rewritten += message[i++];
      continue;
    }
    // A word, dotted paths included (attention.num_tokens).
    size_t end = i;
    while (end < message.size() &&
           (is_word(message[end]) || (message[end] == '.' && end + 1 < message.size() && is_word(message[end + 1])))) {
      ++end;
    }
    const std::string word = message.substr(i, end - i);
    const std::string* words = nullptr;
    for (const FieldName& name : names) {
      if (word == name.field) words = &name.words;
    }
    rewritten += words ? *words : word;
    i = end;
  }
  return {status.code(), rewritten};
}

FieldNames indexer_field_names(const IndexerArrayNames& n) {
  const std::string q = n.q;
  const std::string k = n.k;
  return {{"num_tokens", possessive(q) + " T"},
          {"num_heads", possessive(q) + " H"},
          {"head_dim", possessive(q) + " D"},
          {"num_keys", possessive(k) + " N"},
          {"q_token_stride", stride(q, 0)},
          {"w_token_stride", stride("weights", 0)},
          {"k_row_stride", stride(k, 0)},
          {"logits_stride", stride("logits", 0)},
          {"q", q},
          {"k", k},
          {"k_scale", n.k_scale},
          {"w", "weights"}};
}

FieldNames topk_field_names(const char* rows_from, const char* keys_from) {
  return {{"num_rows", rows_from},
          {"num_keys", keys_from},
          {"logits_stride", stride("logits", 0)},
          {"indices", "out"},
          {"indices_stride", stride("out", 0)},
          {"pages_per_seq", "page_table's P"},
          {"num_seqs", "page_table's B"},
          {"page_table_stride", stride("page_table", 0)}};
}

FieldNames attention_field_names() {
  return {{"num_tokens", "q's T"},
          {"num_heads", "q's h"},
          {"d_qk", "q's d_qk"},
          {"num_kv", "kv's N"},
          {"q_token_stride", stride("q", 0)},
          {"q_head_stride", stride("q", 1)},
          {"kv_row_stride", stride("kv", 0)},
          {"indices_stride", stride("indices", 0)},
          {"out_token_stride", stride("out", 0)},
          {"out_head_stride", stride("out", 1)}};
}

FieldNames lse_merge_field_names() {
  return {{"num_parts", "out_parts' R"},
          {"num_tokens", "out_parts' T"},
          {"num_heads", "out_parts' h"},
          {"part_stride", stride("out_parts", 0)},
          {"token_stride", stride("out_parts", 1)},
          {"head_stride", stride("out_parts", 2)},
          {"out_token_stride", stride("out", 0)},
          {"out_head_stride", stride("out", 1)}};
}

}  // namespace fp8dsa::python
