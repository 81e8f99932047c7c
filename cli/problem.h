// The synthetic prefill the CLI runs: one sequence of `tokens` new tokens over `cached` cached key
// rows (N = cached + tokens), random e4m3 inputs on the host, with the parameter structs that point
// at them.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8dsa/indexer.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"

namespace fp8dsa::cli {

constexpr int kIndexDim = 128;  // indexer D
constexpr int kDimQk = 576;     // 512 nope + 64 rope
constexpr int kDimV = 512;

struct RunOptions {
  int64_t tokens = 0;  // 0: the default of the chosen path
  int64_t cached = -1;  // -1: the default of the chosen path
  int heads = 0;
  int topk = 0;
  int index_heads = 0;
  uint64_t seed = 1234;
  bool force_cpu = false;
  int check_tokens = 8;
};

// The defaults of each path, filled into the options left unset.
//   GPU: T = 4096 new tokens over 28672 cached rows (N = 32768: a 32K-token context that ends with
//        this prefill chunk), h = 128, topk = 2048, H = 64: DeepSeek-V3.2 prefill.
//   CPU: T = 64 over 1984 cached rows (N = 2048), h = 16, topk = 512, H = 64: seconds on a laptop.
RunOptions with_defaults(RunOptions options, bool gpu);

struct HostProblem {
  RunOptions options;
  int64_t num_tokens = 0;
  int64_t num_keys = 0;
  int64_t valid_pairs = 0;  // indexer (token, key) pairs inside [ks, ke)
  float sm_scale = 0.0f;

  std::vector<uint8_t> index_q;      // [T, H, D] e4m3
  std::vector<float> index_w;        // [T, H]
  std::vector<uint8_t> index_k;      // [N, D] e4m3
  std::vector<float> index_k_scale;  // [N]
  std::vector<int32_t> ks, ke;       // [T] causal bounds
  std::vector<uint8_t> q;            // [T, h, 576] e4m3
  std::vector<uint8_t> kv;           // [N, 576] e4m3

  // Stage parameters pointing at the host arrays above (outputs, indices and streams unset).
  IndexerParams indexer_params() const;
  SparseMlaParams attention_params() const;
};

Status make_problem(const RunOptions& options, HostProblem* problem);

// validate(PrefillParams) on the shape the options describe, with stand-in pointers: a bad flag
// value (heads, topk, ...) is reported before anything is allocated.
Status validate_options(const RunOptions& options);

// Prints the shape both paths start with; `where` names the device or "CPU references".
void print_problem(const HostProblem& problem, const char* where);

// The tokens the checks look at: the first, the last and random ones in between (sorted).
std::vector<int64_t> sample_tokens(int64_t num_tokens, int count, uint64_t seed);

}  // namespace fp8dsa::cli
