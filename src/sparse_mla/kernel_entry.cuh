// The one __global__ entry of the warp-specialised sparse MLA kernels (the seesaw, the small-head and
// the V3.2-row kernels): a kernel is a policy type whose roles are static functions, run as
//   every thread: Kernel::setup(smem) (what the roles take: the shared memory, maybe the barriers'
//     addresses; thread 0 initialises the barriers), __syncthreads();
//   warpgroup 0: setmaxnreg down to Kernel::kFirstRoleRegs, Kernel::first_role (a producer, or
//     the V3.2 kernel's score group);
//   warpgroups 1 and 2: setmaxnreg up to Kernel::kSecondRoleRegs, Kernel::second_role with wg 1 or
//     2 (the math, consumer or value groups; what they share is set up once, before they part).
// Each role finds its token and lengths after its setmaxnreg (values live across it get spilled);
// what Setup holds is each kernel's choice as measured. The policies: seesaw_kernel.cuh,
// small_heads_kernel.cuh, v32_kernel.cuh; their launcher: launch_kernel.h (launch_sparse_mla_kernel).
#pragma once

#include <cstdint>

#include "hopper/warpgroup.cuh"
#include "sparse_mla/kernel_args.h"

namespace fp8dsa::detail::sparse_mla {

template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, 1) sparse_mla_kernel(const KernelArgs p) {
  static_assert(Kernel::kThreads == 3 * 128, "one first-role warpgroup and two second-role ones");
  extern __shared__ uint8_t smem_raw[];
  const typename Kernel::Setup setup = Kernel::setup(smem_raw);
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const int thread = threadIdx.x % 128;
  if (wg == 0) {
    hopper::warpgroup_reg_dealloc<Kernel::kFirstRoleRegs>();
    Kernel::first_role(p, setup, thread);
  } else {
    hopper::warpgroup_reg_alloc<Kernel::kSecondRoleRegs>();
    Kernel::second_role(p, setup, wg, thread);
  }
}

}  // namespace fp8dsa::detail::sparse_mla
