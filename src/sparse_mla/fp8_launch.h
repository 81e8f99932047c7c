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

// Launches it on params.stream. Expects validate(params) to have passed. qk_groups other than the
// default are for tests and tuning.
Status launch_sparse_mla_fp8(const SparseMlaParams& params, int qk_groups = kDefaultQkGroups);

// One per instantiation (launch_g<N>.cu).
template <int kQkGroups>
Status launch_fp8_instance(const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream);
template <> Status launch_fp8_instance<1>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<3>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<6>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<9>(const Fp8KernelParams&, unsigned, cudaStream_t);
template <> Status launch_fp8_instance<2>(const Fp8KernelParams&, unsigned, cudaStream_t);

}  // namespace fp8dsa::sparse_mla
