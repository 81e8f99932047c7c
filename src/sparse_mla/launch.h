// Internal: the host side of the native FP8 sparse MLA kernels (launch.cu) and the choices a test
// or a tuning run may make beyond what SparseMlaParams says.
#pragma once

#include <array>

#include <cuda_runtime_api.h>

#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"
#include "sparse_mla/kernel_args.h"

namespace fp8dsa::detail::sparse_mla {

// QK^T runs as this many wgmma chains added in f32 (score_gemm.cuh): the tradeoff between score
// accuracy (lse, max_logits) and speed. The seesaw kernel's default is 4 chains of 6, 4, 4 and 4
// k-steps, the first of them issued under the previous tile's softmax (config.h: SeesawQkPlan); on
// the H200 it runs 1.3% faster than 5 chains of 4 k-steps (128 elements) with 1.3x their lse error,
// which is 0.15x of SPEC 6's bound against the rounding of the inputs; 3 chains of 6 are 0.7%
// faster still with 2.1x (bench/RESULTS.md).
// The score/value design (heads64_kernel.cuh, 5 chains by default) is the previous kernel, kept to
// be measured against: like the seesaw kernel's other chain counts it is built only with
// FP8DSA_TUNING (seesaw_heads64.cu and the heads64_qk_chains<n>.cu files must match these lists).
constexpr int kDefaultQkChains = 4;
constexpr int kScoreValueQkChains = 5;
// The transposed small-head kernel's own count (not a tuning choice).
constexpr int kSmallHeadsQkChains = 9;
#if defined(FP8DSA_TUNING)
inline constexpr std::array kSeesawQkChainChoices{3, 4, 5};
inline constexpr std::array kScoreValueQkChainChoices{1, 5, 9, 18};
#else
inline constexpr std::array kSeesawQkChainChoices{kDefaultQkChains};
inline constexpr std::array<int, 0> kScoreValueQkChainChoices{};
#endif
constexpr bool seesaw_has_qk_chains(int qk_chains) {
  for (int c : kSeesawQkChainChoices)
    if (c == qk_chains) return true;
  return false;
}
constexpr bool score_value_has_qk_chains(int qk_chains) {
  for (int c : kScoreValueQkChainChoices)
    if (c == qk_chains) return true;
  return false;
}
constexpr bool is_instantiated_qk_chains(int qk_chains) {
  return seesaw_has_qk_chains(qk_chains) || score_value_has_qk_chains(qk_chains);
}

// How h < 64 runs: the transposed-orientation kernel (keys as the MMA rows, heads as its N:
// small_heads_kernel.cuh, built for h in {8, 16}), or the 64-head kernel with its rows past h zero.
// kDefault takes the faster one as measured on the H200 (bench/RESULTS.md).
enum class SmallHeads { kDefault, kTransposed, kPadded };
constexpr bool has_transposed_kernel(int num_heads) { return num_heads == 8 || num_heads == 16; }
// Measured faster than the padded 64-head kernel wherever it exists.
constexpr bool transposed_by_default(int num_heads) { return has_transposed_kernel(num_heads); }

// The V3.2-row kernel's bf16 q as this many e4m3 terms (v32_config.h): 2 by default (scores within
// ~2^-8 of bf16 q's), 1 (~2^-4) only as the measured speed alternative.
constexpr int kDefaultV32QTerms = 2;
constexpr bool is_instantiated_v32_q_terms(int q_terms) { return q_terms == 1 || q_terms == 2; }

// The 64-head kernel for 576-byte rows: two math warpgroups in seesaw (seesaw_kernel.cuh), or, in an
// FP8DSA_TUNING build, the earlier design of one score and two value warpgroups (heads64_kernel.cuh),
// kept to be measured beside it. A chain count only the score/value design has runs that design; it
// takes kDefaultQkChains as its own kScoreValueQkChains.
enum class Heads64Design { kSeesaw, kScoreValue };

struct Fp8Tuning {
  int qk_chains = kDefaultQkChains;
  SmallHeads small_heads = SmallHeads::kDefault;
  int v32_q_terms = kDefaultV32QTerms;
  Heads64Design heads64 = Heads64Design::kSeesaw;
};

// True where an FP8 tensor-core kernel exists for these (validated) params: d_qk 576, d_v 512,
// bf16 out, any SPEC head count; e4m3 q and 576-byte rows, or bf16 q and DeepSeek-V3.2's 656-byte
// rows.
bool fp8_kernel_supports(const SparseMlaParams& params);

// Launches it on params.stream. Expects validate(params) to have passed.
Status launch_sparse_mla_fp8(const SparseMlaParams& params, const Fp8Tuning& tuning = {});

// One per instantiation file (heads64_qk_chains*.cu, small_heads_h*.cu).
template <int kQkChains>
Status launch_heads64(const KernelArgs& args, unsigned blocks, cudaStream_t stream);
// seesaw_heads64.cu: qk_chains one of kSeesawQkChainChoices.
Status launch_seesaw(int qk_chains, const KernelArgs& args, unsigned blocks, cudaStream_t stream);
template <int kH>
Status launch_small_heads(const KernelArgs& args, unsigned blocks, cudaStream_t stream);
// v32_heads64.cu: 656-byte rows, bf16 q (KernelArgs::q then points at bf16, strides in elements).
Status launch_v32(int q_terms, const KernelArgs& args, unsigned blocks, cudaStream_t stream);

}  // namespace fp8dsa::detail::sparse_mla
