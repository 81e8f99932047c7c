// Host side of the K-resident scorer: grid (key tiles) x (token chunks), both head dims.
#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "indexer/config.h"
#include "indexer/k_resident_scorer.cuh"
#include "indexer/scorer_launch.h"

namespace fp8dsa::detail::indexer {
namespace {

template <class Cfg>
Status launch_k_resident(const IndexerParams& p) {
  CUtensorMap k_map{}, q_map{};
  FP8DSA_RETURN_IF_ERROR(make_scorer_tensor_maps<Cfg>(p, &k_map, &q_map));
  ScorerArgs args = scorer_args(p);
  const KResidentPlan plan = plan_k_resident(p.num_tokens, p.num_keys, Cfg::kTokens, Cfg::kKeyTile, device_sm_count());
  if (!plan.fits) return invalid_argument("indexer k_resident: too many tokens or keys");
  args.num_token_blocks = static_cast<int>(plan.token_blocks);
  auto kernel = k_resident_scorer_kernel<Cfg>;
  const dim3 grid(static_cast<unsigned>(plan.key_tiles), static_cast<unsigned>(plan.chunks));
  return launch_kernel("k_resident_scorer_kernel", kernel, grid, Cfg::kThreads, Cfg::kSmemBytes, p.stream, k_map,
                       q_map, args);
}

template <int kDim>
Status run_dim(const IndexerParams& p) {
  switch (p.num_heads) {
    case 64: return launch_k_resident<KResidentConfig<64, kDim, 4>>(p);
    case 32: return launch_k_resident<KResidentConfig<32, kDim, 4>>(p);
    case 16: return launch_k_resident<KResidentConfig<16, kDim, 4>>(p);
    case 8: return launch_k_resident<KResidentConfig<8, kDim, 4>>(p);
    case 4: return launch_k_resident<KResidentConfig<4, kDim, 4>>(p);
    default: break;
  }
  return invalid_argument("indexer k_resident: num_heads " + std::to_string(p.num_heads) +
                          " is not one of {4, 8, 16, 32, 64}");
}

}  // namespace

Status run_k_resident(const IndexerParams& p) {
  return p.head_dim == 64 ? run_dim<64>(p) : run_dim<128>(p);
}

}  // namespace fp8dsa::detail::indexer
