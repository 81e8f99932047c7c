// Internal: the host side of the native FP8 sparse MLA kernels (launch.cu) and the choices a test
// or a tuning run may make beyond what SparseMlaParams says.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

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
// faster still with 2.1x (bench/journal/2026-12-01.md, sparse MLA v3 step 2). The other counts are
// built only with FP8DSA_TUNING.
constexpr int kDefaultQkChains = 4;
// The transposed small-head kernel's own count (not a tuning choice).
constexpr int kSmallHeadsQkChains = 9;
#if defined(FP8DSA_TUNING)
inline constexpr std::array kSeesawQkChainChoices{3, 4, 5};
#else
inline constexpr std::array kSeesawQkChainChoices{kDefaultQkChains};
#endif
constexpr bool is_instantiated_qk_chains(int qk_chains) {
  for (int c : kSeesawQkChainChoices)
    if (c == qk_chains) return true;
  return false;
}

// How h < 64 runs: the transposed-orientation kernel (keys as the MMA rows, heads as its N:
// small_heads_kernel.cuh, built for h in {8, 16}), or the 64-head kernel with its rows past h zero.
// kDefault takes the faster one as measured on the H200 (bench/journal/2026-11-29.md, h = 32
// transposed).
enum class SmallHeads { kDefault, kTransposed, kPadded };
constexpr bool has_transposed_kernel(int num_heads) { return num_heads == 8 || num_heads == 16; }
// Measured faster than the padded 64-head kernel wherever it exists.
constexpr bool transposed_by_default(int num_heads) { return has_transposed_kernel(num_heads); }

struct Fp8Tuning {
  int qk_chains = kDefaultQkChains;  // of the seesaw kernel (576-byte rows, h a multiple of 64 or 32)
  SmallHeads small_heads = SmallHeads::kDefault;
  // The 64-head kernel's last wave (tail_split.h): 0 as its cost model says, 1 never split, P in
  // [2, kMaxTailParts] split in P key parts (fewer where topk has fewer pairs of tiles).
  int tail_parts = 0;
};

// True where an FP8 tensor-core kernel exists for these (validated) params: d_qk 576, d_v 512,
// bf16 out, any SPEC head count; e4m3 q and 576-byte rows, or bf16 q and DeepSeek-V3.2's 656-byte
// rows.
bool fp8_kernel_supports(const SparseMlaParams& params);

// Launches it on params.stream. Expects validate(params) to have passed.
Status launch_sparse_mla_fp8(const SparseMlaParams& params, const Fp8Tuning& tuning = {});

// seesaw_heads64.cu: qk_chains one of kSeesawQkChainChoices; grid.y > 1 runs the key parts of
// KernelArgs::part_keys.
Status launch_seesaw(int qk_chains, const KernelArgs& args, dim3 grid, cudaStream_t stream);
#if defined(FP8DSA_MLA_PHASE_PROBE)
// The seesaw kernel's phase marks of its last launch (phase_probe.cuh): kPhaseProbeCtas x kNumMarks.
Status read_phase_probe(std::vector<uint64_t>* marks);
// Its per-step cycle sums of the pair loop: kPhaseProbeCtas x 2 math groups x kNumPairSteps.
Status read_pair_steps(std::vector<uint32_t>* sums);
// The same for the V3.2-row kernel (v32_heads64.cu; phase_probe.cuh: V32ScoreStep, V32ValueStep).
Status read_v32_phase_probe(std::vector<uint64_t>* marks);
Status read_v32_pair_steps(std::vector<uint32_t>* sums);
#endif
// One per instantiation file (small_heads_h*.cu).
template <int kH>
Status launch_small_heads(const KernelArgs& args, unsigned blocks, cudaStream_t stream);
// v32_heads64.cu: 656-byte rows, bf16 q (KernelArgs::q then points at bf16, strides in elements) as
// q_terms (SparseMlaParams::q_terms, 1 or 2) e4m3 terms.
Status launch_v32(int q_terms, const KernelArgs& args, unsigned blocks, cudaStream_t stream);

}  // namespace fp8dsa::detail::sparse_mla
