#include "problem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "tools/random_inputs.h"
#include "core/parallel_for.h"
#include "fp8dsa/pipeline.h"

namespace fp8dsa::cli {
namespace {

// Large tensors are generated in chunks, one seed each, on every core: 350 MB of e4m3 at the GPU
// default would take seconds on one.
constexpr size_t kChunkElements = size_t{1} << 22;

std::vector<uint8_t> random_e4m3_parallel(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  const int64_t chunks = static_cast<int64_t>((n + kChunkElements - 1) / kChunkElements);
  parallel_for(0, chunks, [&](int64_t c) {
    const size_t begin = static_cast<size_t>(c) * kChunkElements;
    const size_t count = std::min(kChunkElements, n - begin);
    const std::vector<uint8_t> part = tools::random_e4m3(count, seed * 1000003 + static_cast<uint64_t>(c));
    std::copy(part.begin(), part.end(), out.begin() + static_cast<std::ptrdiff_t>(begin));
  });
  return out;
}

}  // namespace

RunOptions with_defaults(RunOptions o, bool gpu) {
  if (o.tokens <= 0) o.tokens = gpu ? 4096 : 64;
  if (o.cached < 0) o.cached = gpu ? 32768 - o.tokens : 2048 - o.tokens;
  if (o.cached < 0) o.cached = 0;
  if (o.heads <= 0) o.heads = gpu ? 128 : 16;
  if (o.topk <= 0) o.topk = gpu ? 2048 : 512;
  if (o.index_heads <= 0) o.index_heads = 64;
  return o;
}

Status make_problem(const RunOptions& o, HostProblem* p) {
  p->options = o;
  const SequenceLayout sequence{o.tokens, o.cached};
  p->ks.assign(static_cast<size_t>(o.tokens), 0);
  p->ke.assign(static_cast<size_t>(o.tokens), 0);
  FP8DSA_RETURN_IF_ERROR(build_causal_bounds({&sequence, 1}, p->ks.data(), p->ke.data(), &p->num_tokens,
                                             &p->num_keys));
  p->valid_pairs = 0;
  for (int64_t t = 0; t < p->num_tokens; ++t) p->valid_pairs += p->ke[t] - p->ks[t];
  // DeepSeek-V3.2's softmax scale, 1 / sqrt(128 + 64), without the YaRN factor.
  p->sm_scale = 1.0f / std::sqrt(192.0f);

  const size_t t = static_cast<size_t>(p->num_tokens), n = static_cast<size_t>(p->num_keys);
  const size_t hi = static_cast<size_t>(o.index_heads), h = static_cast<size_t>(o.heads);
  p->index_q = random_e4m3_parallel(t * hi * kIndexDim, o.seed + 1);
  p->index_w = tools::random_f32(t * hi, o.seed + 2, -1.0f, 1.0f);
  p->index_k = random_e4m3_parallel(n * kIndexDim, o.seed + 3);
  p->index_k_scale = tools::random_f32(n, o.seed + 4, 0.5f, 1.5f);
  p->q = random_e4m3_parallel(t * h * kDimQk, o.seed + 5);
  p->kv = random_e4m3_parallel(n * kDimQk, o.seed + 6);
  return Status::ok();
}

IndexerParams HostProblem::indexer_params() const {
  IndexerParams p;
  p.num_tokens = num_tokens;
  p.num_keys = num_keys;
  p.num_heads = options.index_heads;
  p.head_dim = kIndexDim;
  p.q = index_q.data();
  p.w = index_w.data();
  p.k = index_k.data();
  p.k_scale = index_k_scale.data();
  p.ks = ks.data();
  p.ke = ke.data();
  return p;
}

SparseMlaParams HostProblem::attention_params() const {
  SparseMlaParams p;
  p.num_tokens = num_tokens;
  p.num_kv = num_keys;
  p.num_heads = options.heads;
  p.d_qk = kDimQk;
  p.d_v = kDimV;
  p.q = q.data();
  p.kv = kv.data();
  p.topk = options.topk;
  p.sm_scale = sm_scale;
  return p;
}

Status validate_options(const RunOptions& o) {
  // Stand-ins for every array: validate() checks that they are set and aligned but never reads them.
  alignas(256) static unsigned char stand_in[256];
  PrefillParams params;
  IndexerParams& ix = params.indexer;
  ix.num_tokens = o.tokens;
  ix.num_keys = o.tokens + o.cached;
  ix.num_heads = o.index_heads;
  ix.head_dim = kIndexDim;
  ix.q = ix.k = stand_in;
  ix.w = ix.k_scale = reinterpret_cast<const float*>(stand_in);
  ix.ks = ix.ke = reinterpret_cast<const int32_t*>(stand_in);
  SparseMlaParams& at = params.attention;
  at.num_tokens = ix.num_tokens;
  at.num_kv = ix.num_keys;
  at.num_heads = o.heads;
  at.d_qk = kDimQk;
  at.d_v = kDimV;
  at.q = at.kv = stand_in;
  at.out = stand_in;
  at.lse = reinterpret_cast<float*>(stand_in);
  at.sm_scale = 1.0f / std::sqrt(192.0f);
  params.topk = o.topk;
  return validate(params);
}

void print_problem(const HostProblem& p, const char* where) {
  const RunOptions& o = p.options;
  std::printf("fp8dsa run on %s: T=%lld new tokens over %lld cached rows (N=%lld), indexer H=%d D=%d, "
              "attention h=%d d_qk=%d d_v=%d, topk=%d, seed %llu\n",
              where, static_cast<long long>(p.num_tokens), static_cast<long long>(o.cached),
              static_cast<long long>(p.num_keys), o.index_heads, kIndexDim, o.heads, kDimQk, kDimV, o.topk,
              static_cast<unsigned long long>(o.seed));
}

std::vector<int64_t> sample_tokens(int64_t num_tokens, int count, uint64_t seed) {
  std::vector<int64_t> tokens;
  if (count <= 0 || num_tokens <= 0) return tokens;
  if (count >= num_tokens) {
    for (int64_t t = 0; t < num_tokens; ++t) tokens.push_back(t);
    return tokens;
  }
  tokens.push_back(0);
  if (count > 1) tokens.push_back(num_tokens - 1);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(1, std::max<int64_t>(1, num_tokens - 2));
  while (static_cast<int>(tokens.size()) < count) {
    const int64_t t = pick(rng);
    if (std::find(tokens.begin(), tokens.end(), t) == tokens.end()) tokens.push_back(t);
  }
  std::sort(tokens.begin(), tokens.end());
  return tokens;
}

}  // namespace fp8dsa::cli
