// Valid parameter structs over the stand-in arena (common/validation.h: aligned pointers that
// validate() never dereferences), the starting points of the validate() tests and the params fuzz.
#pragma once

#include <cstdint>

#include "common/validation.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/topk.h"

namespace fp8dsa::testing {

// T = 100 tokens over N = 300 keys, H = 64, D = 128.
inline IndexerParams valid_indexer_params() {
  IndexerParams p;
  p.num_tokens = 100;
  p.num_keys = 300;
  p.num_heads = 64;
  p.head_dim = 128;
  p.q = at<const void>(0);
  p.w = at<const float>(256);
  p.k = at<const void>(512);
  p.k_scale = at<const float>(768);
  p.ks = at<const int32_t>(1024);
  p.ke = at<const int32_t>(1280);
  p.logits = at<float>(1536);
  return p;
}

// 37 rows of 5000 keys, k = 2048, no page table.
inline TopkParams valid_topk_params() {
  TopkParams p;
  p.num_rows = 37;
  p.num_keys = 5000;
  p.logits = at<const float>(0);
  p.ks = at<const int32_t>(256);
  p.ke = at<const int32_t>(512);
  p.k = 2048;
  p.indices = at<int32_t>(768);
  return p;
}

// T = 213 tokens over N = 1840 rows, h = 128, topk = 256, 576-byte e4m3 rows.
inline SparseMlaParams valid_sparse_mla_params() {
  SparseMlaParams p;
  p.num_tokens = 213;
  p.num_kv = 1840;
  p.num_heads = 128;
  p.q = at<const void>(0);
  p.kv = at<const void>(256);
  p.indices = at<const int32_t>(512);
  p.topk = 256;
  p.sm_scale = 0.0721688f;
  p.out = at<void>(768);
  p.lse = at<float>(1024);
  return p;
}

}  // namespace fp8dsa::testing
