// Internal, host side: what the Q-resident and K-resident scorer launches share, the tensor maps
// of K ([N][D] rows) and Q ([T][H][D], a box of Cfg::kTokens tokens) and the resolved arguments.
#pragma once

#include <cstdint>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "hopper/tma_map.h"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {

template <class Cfg>
Status make_scorer_tensor_maps(const IndexerParams& p, CUtensorMap* k_map, CUtensorMap* q_map) {
  FP8DSA_RETURN_IF_ERROR(hopper::make_tensor_map_2d_u8(k_map, p.k, static_cast<uint64_t>(p.num_keys), Cfg::kDim,
                                                       static_cast<uint64_t>(p.k_row_stride), Cfg::kKeyTile,
                                                       Cfg::kDim, Cfg::kSwizzle));
  const uint64_t q_dims[3] = {static_cast<uint64_t>(Cfg::kDim), static_cast<uint64_t>(Cfg::kHeads),
                              static_cast<uint64_t>(p.num_tokens)};
  const uint64_t q_strides[2] = {static_cast<uint64_t>(Cfg::kDim), static_cast<uint64_t>(p.q_token_stride)};
  const uint32_t q_box[3] = {static_cast<uint32_t>(Cfg::kDim), static_cast<uint32_t>(Cfg::kHeads),
                             static_cast<uint32_t>(Cfg::kTokens)};
  return hopper::make_tensor_map_3d_u8(q_map, p.q, q_dims, q_strides, q_box, Cfg::kSwizzle);
}

inline ScorerArgs scorer_args(const IndexerParams& p) {
  ScorerArgs args;
  args.num_tokens = p.num_tokens;
  args.num_keys = p.num_keys;
  args.w = p.w;
  args.w_stride = p.w_token_stride;
  args.k_scale = p.k_scale;
  args.ks = p.ks;
  args.ke = p.ke;
  args.logits = p.logits;
  args.logits_stride = p.logits_stride;
  return args;
}

}  // namespace fp8dsa::detail::indexer
