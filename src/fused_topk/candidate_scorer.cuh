// The Q-resident scorer (indexer/q_resident_launch.cuh) instantiated with the candidate output,
// for one head dim (candidate_scorer_d64.cu / _d128.cu compile in parallel).
#pragma once

#include "fused_topk/candidate_output.cuh"
#include "fused_topk/launch.h"
#include "indexer/q_resident_launch.cuh"

namespace fp8dsa::fused_topk_impl {

template <int kDim>
Status launch_candidate_scorer_dim(const IndexerParams& scores, const CandidateBuffers& buffers, int k) {
  indexer_detail::QResidentTuning tuning;
  tuning.shape = indexer_detail::QResidentShape::kAuto;  // one token block per consumer
  tuning.key_splits = buffers.splits;
  // No MMA rotation: a compacting warpgroup would hold its partner's turn for the whole
  // compaction (H200, T = 4096, N = 64K, H = 64: 7.66 ms without the rotation, 8.04 ms with it).
  tuning.ping_pong = false;
  CandidateArgs args;
  args.counts = buffers.counts;
  args.keys = buffers.keys;
  args.rows = buffers.rows;
  args.capacity = buffers.capacity;
  args.k = k;
  return indexer_detail::run_q_resident_dim<kDim, CandidateOutput>(scores, tuning, args);
}

}  // namespace fp8dsa::fused_topk_impl
