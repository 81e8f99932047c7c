// Sparse MLA inputs shaped like a real prefill, for the tests and the benchmark (uniform random data
// flatters sparse attention: it gives flat softmaxes, unrelated neighbouring selections and no
// locality). One causal sequence: T new tokens at the end of an N-row latent cache.
//
// - Selections (MlaSelection::kRealistic): each token keeps the topk visible keys of highest relevance
//   |u_j . v_t| plus a bonus for its most recent keys, in descending relevance order (the order a
//   real top-k returns). The token factor v_t drifts slowly with t, so neighbouring tokens select
//   mostly the same rows. (kUniform: distinct uniform draws instead, for the cost of no locality.)
// - Values: kv rows and queries share the low-rank factors (kv_j ~ A u_j, q_th ~ A w_th with w_th the
//   token factor plus a per-head perturbation, plus noise). The selection ranks keys by |u_j . v_t|
//   while the score follows the signed u_j . w_th: of the keys ranked highest, those of positive
//   product score highest and those of negative product (about half) score lowest, so scores do
//   not descend with the selection order. The queries are scaled so that the scores s = sm_scale * q . k across a
//   token's selected keys have the requested standard deviation (about zero mean: large std means
//   peaked attention).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::tools {

// What the q and kv values are made of (the selections are the same for all three).
enum class MlaValues {
  kRealistic,  // low-rank factors shared with the selection (its top-ranked keys score highest or lowest)
  kRandom,     // iid normal q and kv: scores unrelated to the selection order (score_std sets q's scale)
  kZeros,      // all-zero q and kv (flat attention; score_std is not used)
};

const char* mla_values_name(MlaValues values);  // "realistic", "random", "zeros"

// How each token's keys are chosen.
enum class MlaSelection {
  kRealistic,  // the top-k by relevance to a slowly drifting token factor, in descending order:
               // neighbouring tokens share most rows
  kUniform,    // topk distinct rows drawn uniformly from the token's visible keys, in random order:
               // no locality between neighbours, the whole pool touched
};

const char* mla_selection_name(MlaSelection selection);  // "realistic", "uniform"

struct MlaWorkloadSpec {
  int64_t num_tokens = 4096;  // T; token t sits at cache row num_kv - num_tokens + t
  int64_t num_kv = 32768;     // N >= T
  int num_heads = 128;
  int topk = 2048;
  float sm_scale = 0.07216878f;  // 1 / sqrt(192)
  double score_std = 3.0;        // target std of the scores across a token's selected keys
  int rank = 16;                 // of the shared factors
  int local_window = 128;        // recent keys with a selection bonus
  double drift = 0.03;           // step of the token factor's random walk (|v| = 1)
  uint64_t seed = 1;
  MlaValues values = MlaValues::kRealistic;
  MlaSelection selection = MlaSelection::kRealistic;
  // > 0: also keep the values before their e4m3 rounding (MlaWorkload::q_unrounded, kv_unrounded),
  // q for the tokens t % unrounded_every == 0 only: the f64 reference on them is SPEC 6's R0.
  int64_t unrounded_every = 0;
};

struct MlaWorkload {
  MlaWorkloadSpec spec;          // what it was made from
  std::vector<uint8_t> q;        // [T, h, 576] e4m3, packed
  std::vector<uint8_t> kv;       // [N, 576] e4m3, packed
  std::vector<int32_t> indices;  // [T, topk] absolute rows (descending relevance when realistic), -1 padding
  // With spec.unrounded_every = e > 0, the f32 values that q and kv round (e4m3, RNE, saturating):
  std::vector<float> q_unrounded;   // [ceil(T / e), h, 576]: token t = i * e
  std::vector<float> kv_unrounded;  // [N, 576]
  int64_t valid_pairs = 0;       // selected (token, key) pairs
  // Measured on a sample of (token, head) rows, in f64 on the e4m3 values:
  double score_std = 0.0;        // mean over rows of the std of s across the selected keys
  double score_mean = 0.0;       // mean over rows of the mean of s
  double mean_max_prob = 0.0;    // mean over rows of the largest softmax probability
  double neighbour_overlap = 0.0;  // mean fraction of token t's selection also selected by t + 1
  std::string describe() const;  // "score std 3.02 (mean -0.11), mean max prob 0.21, neighbour overlap 0.93"
};

// Throws std::invalid_argument on an impossible spec (N < T, topk not positive, ...).
MlaWorkload make_mla_workload(const MlaWorkloadSpec& spec);

// The sparse MLA problem of the workload's first h <= spec.num_heads heads (q keeps its token stride
// of spec.num_heads rows): host pointers into w, sm_scale of the spec, no outputs (packed strides).
// Throws std::invalid_argument for h outside [1, spec.num_heads].
SparseMlaParams mla_params(const MlaWorkload& w, int h);

}  // namespace fp8dsa::tools
