// Internal: host launcher of the native FP8 sparse MLA kernel (fp8_kernel.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"

namespace fp8dsa::sparse_mla {

struct Fp8KernelParams;

// QK^T runs as this many wgmma chains added in f32 (the e4m3 wgmma accumulator keeps ~13 mantissa
// bits): a tradeoff between score accuracy (lse, max_logits) and speed. Instantiated: 1, 2, 3, 6, 9.
constexpr int kDefaultQkGroups = 3;
bool is_instantiated_qk_groups(int qk_groups);

// True where the FP8 tensor-core kernel exists for these (validated) params: h = 64 or 128.
bool fp8_kernel_supports(const SparseMlaParams& params);

// How h < 64 runs: the transposed-orientation kernel (keys as the MMA rows, heads as its columns:
// fp8_small_heads_kernel.cuh; built for h in {8, 16, 32}), or the h = 64 kernel with its MMA rows
// past h zero (the yardstick the other is measured against). kDefault takes the faster one as
// measured on the H200: transposed for h in {8, 16}, padded for h = 32.
enum class SmallHeads { kDefault, kTransposed, kPadded };
constexpr bool has_transposed_kernel(int num_heads) { return num_heads == 8 || num_heads == 16 || num_heads == 32; }
constexpr bool transposed_by_default(int num_heads) { return num_heads == 8 || num_heads == 16; }

// How a token's head blocks run when h is a multiple of 128: as independent CTAs that each gather
// every K row, sharing only through L2 (kSeparate), or as 2-CTA clusters that gather every row once
// and copy each half into the peer CTA (kCluster). The cluster halves the L2 -> SM gather traffic
// but measured slower on the H200 (T = 4096, N = 32768, topk = 2048, h = 128: 565-584 TFLOPS against
// 700-727; bench/RESULTS.md), so kSeparate is the default and kCluster a tested alternative.
enum class HeadPairs { kSeparate, kCluster };
constexpr HeadPairs kDefaultHeadPairs = HeadPairs::kSeparate;

// Launches it on params.stream. Expects validate(params) to have passed. qk_groups other than the
// default, SmallHeads other than kDefault and HeadPairs::kCluster are for tests and tuning (the
// transposed kernel and the cluster kernel are built for the default qk_groups only).
Status launch_sparse_mla_fp8(const SparseMlaParams& params, int qk_groups = kDefaultQkGroups,
                             SmallHeads small_heads = SmallHeads::kDefault,
                             HeadPairs head_pairs = kDefaultHeadPairs);

// The 2-CTA cluster kernel (launch_cluster.cu); blocks is even.
Status launch_fp8_cluster(const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream);

// The transposed-orientation kernel for h in {8, 16, 32} (launch_small_heads.cu).
Status launch_fp8_small_heads(const Fp8KernelParams& params, int num_heads, unsigned blocks, cudaStream_t stream);

// One per instantiation (launch_g<N>.cu).
template <int kQkGroups>
Status launch_fp8_instance(const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream);
template <> Status launch_fp8_instance<1>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<3>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<6>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<9>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<2>(const Fp8KernelParams&, unsigned, cudaStream_t);

}  // namespace fp8dsa::sparse_mla
