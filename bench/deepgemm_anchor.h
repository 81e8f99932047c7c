// DeepGEMM's indexer scorer as SGLang ships it (sgl-deep-gemm 0.2.5, sm90_fp8_mqa_logits), through
// the anchor executable ../shared/anchors/deepgemm_indexer_bench: one case's inputs and logits from
// its --dump mode, and its own timing of that case (the mqa_ms column of its table). The indexer
// benchmark runs our scorer on exactly those inputs and records DeepGEMM's rows beside ours
// (baseline=deepgemm). Host side only: no CUDA here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8dsa/status.h"

namespace fp8dsa::bench {

// One case as the anchor dumps it (D = 128): q e4m3 [T, H, D], k e4m3 [N, D], k_scale f32 [N], w f32
// [T, H], ks / ke i32 [T], and DeepGEMM's logits in our absolute-column layout: f32 [T, stride], -inf
// outside [ks[t], ke[t]).
struct DeepgemmCase {
  int64_t num_tokens = 0, num_keys = 0;
  int num_heads = 0;
  int64_t stride = 0;
  std::vector<uint8_t> q, k;
  std::vector<float> k_scale, w, logits;
  std::vector<int32_t> ks, ke;
};

constexpr int kDeepgemmHeadDim = 128;

// Reads a dump of (T, N, H) from `dir`: every file must hold at least its shape's bytes (k_scale may
// be padded: its first N values are taken), logits.f32 exactly T * stride floats, and a row stride S >= N: stride.txt
// holding S alone or a line "stride S", or else meta.txt's line "stride S".
Status read_deepgemm_case(const std::string& dir, int64_t num_tokens, int64_t num_keys, int num_heads,
                          DeepgemmCase* out);

// Runs `exe --dump dir --T T --N N --H H` and reads what it wrote.
Status dump_deepgemm_case(const std::string& exe, const std::string& dir, int64_t num_tokens, int64_t num_keys,
                          int num_heads, DeepgemmCase* out);

// Runs `exe --dump dir --T T --N N --H H --time --iters iters`: DeepGEMM timed on exactly the bytes
// it dumps to `dir` (one input set, the set ours is timed on), and returns its mqa_ms_median.
Status time_deepgemm_dump(const std::string& exe, const std::string& dir, int64_t num_tokens, int64_t num_keys,
                          int num_heads, int iters, double* ms);

// The mqa_ms_median of a line `dump_case_time H=.. N=.. T=.. mqa_ms_median <ms> ...` for (H, N, T).
// False when no line matches.
bool parse_deepgemm_dump_time(const std::string& output, int num_heads, int64_t num_keys, int64_t num_tokens,
                              double* ms);

// Runs `exe --case H:N:T --no-check --iters iters` and returns the case's mqa_ms (inputs it
// regenerates from its own seed: not the dumped bytes).
Status time_deepgemm_case(const std::string& exe, int64_t num_tokens, int64_t num_keys, int num_heads, int iters,
                          double* ms);

// The mqa_ms of case (H, N, T) in the anchor's table: a row whose integer columns before the first
// '|' start with H, N and T, and whose first column after it is mqa_ms. False when no row matches.
bool parse_deepgemm_mqa_ms(const std::string& output, int num_heads, int64_t num_keys, int64_t num_tokens,
                           double* ms);

}  // namespace fp8dsa::bench
