// The Q-resident scorer (indexer/q_resident_launch.cuh) instantiated with the candidate output,
// for one head dim (candidate_scorer_d64.cu / _d128.cu compile in parallel).
#pragma once

#include "fused_topk/candidate_output.cuh"
#include "fused_topk/launch.h"
#include "indexer/q_resident_launch.cuh"

namespace fp8dsa::detail::fused_topk {

template <int kDim>
Status launch_candidate_scorer_dim(const IndexerParams& scores, const CandidateBuffers& buffers, int k) {
  CandidateArgs args;
  args.counts = buffers.counts;
  args.entries = buffers.entries;
  args.capacity = buffers.capacity;
  args.k = k;
  args.sample_stride = sample_stride(scores.num_keys, buffers.splits, buffers.capacity);
  args.sample_target = buffers.capacity * kSampleTargetPercent / 100;
  detail::indexer::QResidentTuning tuning;
  tuning.shape = detail::indexer::QResidentShape::kAuto;  // one token block per consumer
  tuning.key_splits = buffers.splits;
  // The MMA rotation only with a sample: without one a compacting warpgroup holds its partner's
  // turn through each of its many compactions (bench/journal/2026-12-01.md, the prefloor).
  tuning.ping_pong = args.sample_stride > 0;
  if (args.sample_stride == 0) return detail::indexer::run_q_resident_dim<kDim, CandidateOutput<false>>(scores, tuning, args);
  FP8DSA_RETURN_IF_ERROR((detail::indexer::run_q_resident_dim<kDim, CandidateOutput<true>>(scores, tuning, args)));
  // The (token, split)s whose sampled floor let fewer than k cells in, again with no floor; a
  // launch of CTAs that find nothing marked when there are none.
  args.sample_stride = 0;
  args.redo = true;
  return detail::indexer::run_q_resident_dim<kDim, CandidateOutput<false>>(scores, tuning, args);
}

}  // namespace fp8dsa::detail::fused_topk
