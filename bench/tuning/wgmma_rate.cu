// Tuning driver (not a test, not the benchmark): the rates of the e4m3 wgmma shapes and issue patterns
// the sparse MLA schedules are built from, measured alone on every SM (one CTA a SM, clock64 around
// each warpgroup's loop, the median over CTAs). What it answers: how many cycles an m64n64k32 unit
// (262,144 FLOP) takes in each pattern, against 32 at the dense FP8 rate (8,192 FLOP a clock a SM).
//   fp8dsa_wgmma_rate [iters=512]
// Rows:
//   ss/rs N x acc, wg   back-to-back wgmmas m64nNk32 (SS: both operands in shared memory; RS: A in
//                       registers), acc accumulators in turn, commit groups of 4 wgmmas, at most
//                       two groups in flight; wg = 1 or 2 warpgroups issuing at once
//   pv                  the seesaw's P.V of a pair (value_gemm.cuh): 4 k-steps of 4 RS m64n64k32 into
//                       O^T, V^T fragments built from shared loads and byte permutes, double-buffered,
//                       the waits of seesaw_kernel.cuh's pair_values; "pv fixed" keeps the fragments
//                       (no loads: the waits alone); "pv rescale" multiplies O^T by factors first
//   pv ldsm             the same with the fragments from ldmatrix.x4.trans and 4 byte permutes a block
//                       (value_gemm.cuh's load_value_fragments_ldsm: half the instructions of the
//                       8-byte loads)
//   pv all loaded       the same with every k-step's fragments loaded first, one commit and one wait
//   pv ss n64 / n256    the pair's P.V with V^T in shared memory: 16 SS m64n64k32, or O = P.V as 4 SS
//                       m64n256k32 (FlashAttention-3's FP8 form), one wait a pair
//   qk chains c         one 18-k-step QK^T (m64n64k32 SS) as chains of c k-steps, each waited and
//                       promoted into the f32 scores (score_gemm.cuh's pattern)
// and last, how long issuing 16 units of wgmma (as m64n64, m64n128 or m64n256) holds the issuing warp
// against when they are complete: how much tensor work a warp can leave queued while it does other
// work.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "hopper/smem_access.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "sparse_mla/value_gemm.cuh"
#include "sparse_mla/value_layout.h"
#include "tool_support.h"

namespace {

namespace hw = fp8dsa::hopper;
namespace mla = fp8dsa::detail::sparse_mla;
using hw::Swizzle;

constexpr int kSmemBytes = 128 * 1024;  // more than half an SM's: one CTA a SM
constexpr uint32_t kBOffset = 16 * 1024;
constexpr uint32_t kPOffset = 64 * 1024;

__device__ __forceinline__ uint32_t smem_base(uint8_t* raw) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  return (a + 1023u) & ~1023u;
}

// Small e4m3 values (0x30: 0.5 and friends) everywhere the wgmmas read, visible to them.
__device__ __forceinline__ void fill_operands(uint32_t smem) {
  for (uint32_t i = threadIdx.x; i < (kSmemBytes - 1024) / 4; i += blockDim.x) hw::sts32(smem + 4 * i, 0x30383038u);
  hw::fence_proxy_async_smem();
  __syncthreads();
}

template <int kRegs>
__device__ __forceinline__ float fold(const float (&r)[kRegs]) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kRegs; ++i) s += r[i];
  return s;
}

// kAcc accumulators of kRegs registers: zeroed, and summed (to keep them live).
template <int kAcc, int kRegs>
__device__ __forceinline__ void zero(float (&acc)[kAcc][kRegs]) {
#pragma unroll
  for (int a = 0; a < kAcc; ++a)
#pragma unroll
    for (int i = 0; i < kRegs; ++i) acc[a][i] = 0.0f;
}
template <int kAcc, int kRegs>
__device__ __forceinline__ float fold(float (&acc)[kAcc][kRegs]) {
  float s = 0.0f;
#pragma unroll
  for (int a = 0; a < kAcc; ++a) {
    hw::wgmma_fence_operands(acc[a]);
    s += fold(acc[a]);
  }
  return s;
}

// Back-to-back m64nNk32: commit groups of 4 wgmmas, kAcc accumulators in turn.
template <int N, bool kRs, int kAcc>
__device__ __forceinline__ float back_to_back(uint32_t smem, int iters) {
  float acc[kAcc][N / 2];
  zero(acc);
  uint32_t frag[4];
  hw::lds128(frag, smem + 16 * (threadIdx.x % 128));
  for (int it = 0; it < iters; ++it) {
    const uint32_t kb = 32u * (it % 2);
    const uint64_t desc_a = hw::kmajor_descriptor(smem, Swizzle::k64B, 64, kb);
    const uint64_t desc_b = hw::kmajor_descriptor(smem + kBOffset, Swizzle::k64B, N, kb);
#pragma unroll
    for (int a = 0; a < kAcc; ++a) hw::wgmma_fence_operands(acc[a]);
#pragma unroll
    for (int j = 0; j < 4; ++j) hw::wgmma_fence_operand(frag[j]);
    hw::wgmma_fence();
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      if constexpr (kRs) {
        hw::WgmmaE4m3<N>::rs(acc[w % kAcc], frag, desc_b, true);
      } else {
        hw::WgmmaE4m3<N>::ss(acc[w % kAcc], desc_a, desc_b, true);
      }
    }
    hw::wgmma_commit_group();
    hw::wgmma_wait_group<1>();
  }
  hw::wgmma_wait_group<0>();
  return fold(acc);
}

enum class PvMode { kLoads, kFixed, kRescale, kLdsm };

// The seesaw's P.V of one pair, iters times (tiles a and b both read the K tile at smem).
template <PvMode kMode>
__device__ __forceinline__ float pair_values_loop(uint32_t smem, int iters, int group) {
  const int thread = threadIdx.x % 128;
  const mla::ValueLoads loads = mla::value_loads(group, thread);
  const uint32_t ldsm_offset = mla::value_ldsm_offset(group, thread);
  const auto load = [&](uint32_t (&f)[4][4], uint32_t tile, int ks) {
    if constexpr (kMode == PvMode::kLdsm) {
      mla::load_value_fragments_ldsm(f, tile, ldsm_offset, ks);
    } else {
      mla::load_value_fragments(f, tile, loads, ks);
    }
  };
  float o[4][32];
  zero(o);
  const uint64_t desc_pa = hw::kmajor_descriptor(smem + kPOffset, Swizzle::k64B, 64, 0);
  const uint64_t desc_pb = hw::advance_descriptor(desc_pa, 4096);
  uint32_t frag[2][4][4];
  load(frag[0], smem, 0);
  load(frag[1], smem, 1);
  for (int it = 0; it < iters; ++it) {
    if constexpr (kMode == PvMode::kRescale) {
      const float f = 1.0f - 1e-7f * static_cast<float>(it % 3);
#pragma unroll
      for (int mb = 0; mb < 4; ++mb)
#pragma unroll
        for (int r = 0; r < 32; ++r) o[mb][r] *= f;
    }
    if constexpr (kMode != PvMode::kFixed) load(frag[0], smem, 0);
    mla::issue_value_mma_step(o, frag[0], desc_pa, desc_pa);
    if constexpr (kMode != PvMode::kFixed) load(frag[1], smem, 1);
    mla::issue_value_mma_step(o, frag[1], hw::advance_descriptor(desc_pa, 32), hw::advance_descriptor(desc_pa, 32));
    hw::wgmma_wait_group<1>();
    mla::value_mma_operands_free(o, frag[0]);
    if constexpr (kMode != PvMode::kFixed) load(frag[0], smem + 8192, 0);
    mla::issue_value_mma_step(o, frag[0], desc_pb, desc_pb);
    hw::wgmma_wait_group<1>();
    mla::value_mma_operands_free(o, frag[1]);
    if constexpr (kMode != PvMode::kFixed) load(frag[1], smem + 8192, 1);
    mla::issue_value_mma_step(o, frag[1], hw::advance_descriptor(desc_pb, 32), hw::advance_descriptor(desc_pb, 32));
    hw::wgmma_wait_group<0>();
    mla::value_mma_operands_free(o, frag[0]);
    mla::value_mma_operands_free(o, frag[1]);
  }
  return fold(o);
}

// The same pair with every k-step's fragments loaded first (64 registers), then the 16 wgmmas in
// one commit group and one wait.
__device__ __forceinline__ float pair_values_all_loaded_loop(uint32_t smem, int iters, int group) {
  const mla::ValueLoads loads = mla::value_loads(group, threadIdx.x % 128);
  float o[4][32];
  zero(o);
  const uint64_t desc_pa = hw::kmajor_descriptor(smem + kPOffset, Swizzle::k64B, 64, 0);
  const uint64_t desc_pb = hw::advance_descriptor(desc_pa, 4096);
  const uint64_t desc_p[4] = {desc_pa, hw::advance_descriptor(desc_pa, 32), desc_pb,
                              hw::advance_descriptor(desc_pb, 32)};
  uint32_t frag[4][4][4];  // [k-step of the pair][block][register]
  const auto fence_operands = [&]() {
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) {
      hw::wgmma_fence_operands(o[mb]);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int j = 0; j < 4; ++j) hw::wgmma_fence_operand(frag[ks][mb][j]);
    }
  };
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) mla::load_value_fragments(frag[ks], smem + 8192 * (ks / 2), loads, ks % 2);
    fence_operands();
    hw::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int mb = 0; mb < 4; ++mb) hw::WgmmaE4m3<64>::rs(o[mb], frag[ks][mb], desc_p[ks], true);
    hw::wgmma_commit_group();
    hw::wgmma_wait_group<0>();
    fence_operands();
  }
  return fold(o);
}

// The same pair's P.V with V^T as a shared-memory operand (as if transposed there): 16 SS
// m64n64k32 a group (O^T blocks, A = V^T rows), or 4 SS m64n256k32 (O = P.V, A = P, B = V^T of the
// group's 256 d_v); commit and wait once a pair.
template <bool kWide>
__device__ __forceinline__ float pair_values_ss_loop(uint32_t smem, int iters) {
  float o[4][32];
  zero(o);
  float (&wide)[128] = *reinterpret_cast<float(*)[128]>(&o[0][0]);
  const uint64_t desc_p = hw::kmajor_descriptor(smem + kPOffset, Swizzle::k64B, 64, 0);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) hw::wgmma_fence_operands(o[mb]);
    hw::wgmma_fence();
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        const uint64_t p = hw::advance_descriptor(desc_p, 4096 * t + 32 * ks);
        if constexpr (kWide) {
          hw::WgmmaE4m3<256>::ss(wide, p, hw::kmajor_descriptor(smem + 8192 * t, Swizzle::k64B, 256, 32 * ks), true);
        } else {
#pragma unroll
          for (int mb = 0; mb < 4; ++mb)
            hw::WgmmaE4m3<64>::ss(o[mb], hw::kmajor_descriptor(smem + 8192 * t + 4096 * mb, Swizzle::k64B, 64, 32 * ks),
                                  p, true);
        }
      }
    hw::wgmma_commit_group();
    hw::wgmma_wait_group<0>();
  }
  return fold(o);
}

// One 18-k-step QK^T (Q at smem, K at smem + kBOffset, 576 bytes of K each) as chains of kChain
// k-steps, each waited for and added into the scores; iters times.
template <int kChain>
__device__ __forceinline__ float qk_chains_loop(uint32_t smem, int iters) {
  constexpr int kSteps = 18;
  float s[32], lead[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c0 = 0; c0 < kSteps; c0 += kChain) {
      hw::wgmma_fence_operands(lead);
      hw::wgmma_fence();
#pragma unroll
      for (int k = c0; k < c0 + kChain && k < kSteps; ++k) {
        const uint32_t kb = 32u * k;
        hw::WgmmaE4m3<64>::ss(lead, hw::kmajor_descriptor(smem, Swizzle::k64B, 64, kb),
                              hw::kmajor_descriptor(smem + kBOffset, Swizzle::k64B, 64, kb), k > c0);
      }
      hw::wgmma_commit_group();
      hw::wgmma_wait_group<0>();
      hw::wgmma_fence_operands(lead);
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] += lead[i];
    }
  }
  return fold(s);
}

// How long issuing one commit group of 16 m64n64k32 units as kCount wgmmas m64nNk32 (SS, one
// accumulator) holds the issuing warp, and how long until it is complete: clock64 after the commit and
// after the wait, summed over iters. Whether the wgmmas a warp can leave queued are counted in
// instructions or in tensor cycles.
template <int N>
__device__ __forceinline__ void issue_and_complete(uint32_t smem, int iters, long long& issue, long long& done) {
  constexpr int kCount = 16 * 64 / N;
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  issue = 0;
  done = 0;
  for (int it = 0; it < iters; ++it) {
    const long long t0 = clock64();
    hw::wgmma_fence_operands(acc);
    hw::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const uint32_t kb = 32u * (k % 2);
      hw::WgmmaE4m3<N>::ss(acc, hw::kmajor_descriptor(smem, Swizzle::k64B, 64, kb),
                           hw::kmajor_descriptor(smem + kBOffset, Swizzle::k64B, N, kb), true);
    }
    hw::wgmma_commit_group();
    const long long t1 = clock64();
    hw::wgmma_wait_group<0>();
    hw::wgmma_fence_operands(acc);
    const long long t2 = clock64();
    issue += t1 - t0;
    done += t2 - t0;
  }
  if (fold(acc) == 12345.0f) issue = 0;
}

template <int N>
__global__ void __launch_bounds__(256, 1) issue_kernel(int iters, int warpgroups, long long* out) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem = smem_base(smem_raw);
  fill_operands(smem);
  const int wg = threadIdx.x / 128;
  if (wg >= warpgroups) return;
  long long issue = 0, done = 0;
  issue_and_complete<N>(smem, iters, issue, done);
  if (threadIdx.x % 128 == 0) {
    out[4 * blockIdx.x + 2 * wg] = issue;
    out[4 * blockIdx.x + 2 * wg + 1] = done;
  }
}

enum class Kind { kSs, kRs, kPv, kPvLdsm, kPvFixed, kPvRescale, kPvAllLoaded, kPvSs, kPvSsWide, kQk };

template <Kind kKind, int N, int kAcc>
__global__ void __launch_bounds__(256, 1) rate_kernel(int iters, int warpgroups, long long* cycles, float* sink) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem = smem_base(smem_raw);
  fill_operands(smem);
  const int wg = threadIdx.x / 128;
  if (wg >= warpgroups) return;
  const long long t0 = clock64();
  float s = 0.0f;
  if constexpr (kKind == Kind::kSs || kKind == Kind::kRs) {
    s = back_to_back<N, kKind == Kind::kRs, kAcc>(smem, iters);
  } else if constexpr (kKind == Kind::kPv) {
    s = pair_values_loop<PvMode::kLoads>(smem, iters, wg);
  } else if constexpr (kKind == Kind::kPvLdsm) {
    s = pair_values_loop<PvMode::kLdsm>(smem, iters, wg);
  } else if constexpr (kKind == Kind::kPvFixed) {
    s = pair_values_loop<PvMode::kFixed>(smem, iters, wg);
  } else if constexpr (kKind == Kind::kPvRescale) {
    s = pair_values_loop<PvMode::kRescale>(smem, iters, wg);
  } else if constexpr (kKind == Kind::kPvAllLoaded) {
    s = pair_values_all_loaded_loop(smem, iters, wg);
  } else if constexpr (kKind == Kind::kPvSs) {
    s = pair_values_ss_loop<false>(smem, iters);
  } else if constexpr (kKind == Kind::kPvSsWide) {
    s = pair_values_ss_loop<true>(smem, iters);
  } else {
    s = qk_chains_loop<N>(smem, iters);
  }
  const long long t1 = clock64();
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
  if (s == 12345.0f) *sink = s;  // keeps the results live
}

// The median of one value a CTA (reorders v).
double median(std::vector<long long>& v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return static_cast<double>(v[v.size() / 2]);
}

struct Row {
  std::string name;
  void (*kernel)(int, int, long long*, float*);
  double units_per_iter;  // m64n64k32 units a warpgroup issues per iteration
};

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(8, std::atoi(argv[1])) : 512;
  cudaDeviceProp prop{};
  FP8DSA_TOOL_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  long long* cycles = nullptr;
  float* sink = nullptr;
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&cycles, sizeof(long long) * 2 * sms));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&sink, sizeof(float)));
  const std::vector<Row> rows = {
      {"ss n32 x4", rate_kernel<Kind::kSs, 32, 4>, 2},
      {"ss n64 x4", rate_kernel<Kind::kSs, 64, 4>, 4},
      {"ss n64 x1", rate_kernel<Kind::kSs, 64, 1>, 4},
      {"ss n128 x2", rate_kernel<Kind::kSs, 128, 2>, 8},
      {"ss n256 x1", rate_kernel<Kind::kSs, 256, 1>, 16},
      {"rs n32 x4", rate_kernel<Kind::kRs, 32, 4>, 2},
      {"rs n64 x4", rate_kernel<Kind::kRs, 64, 4>, 4},
      {"rs n64 x1", rate_kernel<Kind::kRs, 64, 1>, 4},
      {"rs n128 x2", rate_kernel<Kind::kRs, 128, 2>, 8},
      {"rs n256 x1", rate_kernel<Kind::kRs, 256, 1>, 16},
      {"pv", rate_kernel<Kind::kPv, 64, 4>, 16},
      {"pv ldsm", rate_kernel<Kind::kPvLdsm, 64, 4>, 16},
      {"pv fixed", rate_kernel<Kind::kPvFixed, 64, 4>, 16},
      {"pv rescale", rate_kernel<Kind::kPvRescale, 64, 4>, 16},
      {"pv all loaded", rate_kernel<Kind::kPvAllLoaded, 64, 4>, 16},
      {"pv ss n64", rate_kernel<Kind::kPvSs, 64, 4>, 16},
      {"pv ss n256", rate_kernel<Kind::kPvSsWide, 64, 4>, 16},
      {"qk chains 4", rate_kernel<Kind::kQk, 4, 1>, 18},
      {"qk chains 6", rate_kernel<Kind::kQk, 6, 1>, 18},
      {"qk chains 9", rate_kernel<Kind::kQk, 9, 1>, 18},
      {"qk chains 18", rate_kernel<Kind::kQk, 18, 1>, 18},
  };
  std::printf("%s, %d SMs, %d iterations; cycles a m64n64k32 unit (32 = the dense FP8 rate), median over CTAs\n",
              prop.name, sms, iters);
  std::printf("%-14s %12s %12s\n", "pattern", "1 warpgroup", "2 warpgroups");
  for (const Row& row : rows) {
    FP8DSA_TOOL_CHECK_CUDA(cudaFuncSetAttribute(row.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    double per_unit[2] = {0, 0};
    for (int wgs = 1; wgs <= 2; ++wgs) {
      std::vector<long long> host(2 * sms, 0);
      for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
        FP8DSA_TOOL_CHECK_CUDA(cudaMemset(cycles, 0, sizeof(long long) * 2 * sms));
        row.kernel<<<sms, 256, kSmemBytes>>>(iters, wgs, cycles, sink);
        FP8DSA_TOOL_CHECK_CUDA(cudaGetLastError());
        FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
      }
      FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(host.data(), cycles, sizeof(long long) * 2 * sms, cudaMemcpyDeviceToHost));
      std::vector<long long> per_cta(sms);
      for (int c = 0; c < sms; ++c) per_cta[c] = std::max(host[2 * c], host[2 * c + 1]);
      // With two warpgroups the tensor pipe is shared: cycles per unit of both groups' work.
      per_unit[wgs - 1] = median(per_cta) / (row.units_per_iter * iters * wgs);
    }
    std::printf("%-14s %12.1f %12.1f\n", row.name.c_str(), per_unit[0], per_unit[1]);
  }
  // Issue against completion of 16 units as 16 m64n64k32, 8 m64n128k32 or 4 m64n256k32 (group 0's,
  // median over CTAs, cycles a commit group).
  {
    long long* out = nullptr;
    FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&out, sizeof(long long) * 4 * sms));
    const struct {
      int n;
      void (*kernel)(int, int, long long*);
    } shapes[] = {{64, issue_kernel<64>}, {128, issue_kernel<128>}, {256, issue_kernel<256>}};
    for (const auto& shape : shapes) {
      FP8DSA_TOOL_CHECK_CUDA(
          cudaFuncSetAttribute(shape.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
      for (int wgs = 1; wgs <= 2; ++wgs) {
        const int n = std::max(8, iters / 8);
        shape.kernel<<<sms, 256, kSmemBytes>>>(n, wgs, out);
        shape.kernel<<<sms, 256, kSmemBytes>>>(n, wgs, out);
        FP8DSA_TOOL_CHECK_CUDA(cudaGetLastError());
        FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<long long> host(4 * sms);
        FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(host.data(), out, sizeof(long long) * 4 * sms, cudaMemcpyDeviceToHost));
        std::vector<long long> issue(sms), done(sms);
        for (int c = 0; c < sms; ++c) {
          issue[c] = host[4 * c];
          done[c] = host[4 * c + 1];
        }
        std::printf("16 units as %2d x m64n%dk32, %d warpgroup(s): issue holds the warp %.0f cycles, complete after %.0f\n",
                    16 * 64 / shape.n, shape.n, wgs, median(issue) / n, median(done) / n);
      }
    }
    FP8DSA_TOOL_CHECK_CUDA(cudaFree(out));
  }
  FP8DSA_TOOL_CHECK_CUDA(cudaFree(cycles));
  FP8DSA_TOOL_CHECK_CUDA(cudaFree(sink));
  return 0;
}
