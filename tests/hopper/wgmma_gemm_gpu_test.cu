// FP8 wgmma micro-GEMM: D[64][N] = A[64][K] . B[N][K]^T with both operands K-major in swizzled
// shared memory, filled either by plain stores at kmajor_offset() or by TMA. Checks the wrappers,
// the descriptor and the swizzle arithmetic against the hardware.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <cuda_fp8.h>

#include "common/gpu_test.h"
#include "hopper/mbarrier.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/tma.cuh"
#include "hopper/tma_map.h"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"

namespace fp8dsa::hopper {
namespace {

using tools::DeviceBuffer;

constexpr int kM = 64;

enum class Fill { kStores, kTma, kRegistersA };

template <int N, Swizzle S, int K, Fill F>
__global__ void __launch_bounds__(128, 1)
    wgmma_gemm_kernel(const uint8_t* a, const uint8_t* b, float* d, const __grid_constant__ CUtensorMap map_a,
                      const __grid_constant__ CUtensorMap map_b) {
  constexpr uint32_t kWidth = swizzle_width_bytes(S);
  static_assert(K % kWidth == 0 && K % 32 == 0, "K must fill whole swizzle atoms");
  constexpr uint32_t kBytesA = kM * K;
  // The swizzle pattern repeats every 1024 bytes of shared address and the descriptors assume
  // tiles start on that boundary (base_offset 0): align the dynamic base by hand.
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - smem_address(smem_raw) % 1024) % 1024);
  uint8_t* sa = smem;
  uint8_t* sb = smem + ((kBytesA + 1023) / 1024) * 1024;
  __shared__ uint64_t bar;
  const int tid = threadIdx.x;
  if constexpr (F == Fill::kTma) {
    if (tid == 0) {
      mbarrier_init(&bar, 1);
      mbarrier_init_fence();
    }
    __syncthreads();
    if (tid == 0) {
      mbarrier_arrive_expect_tx(&bar, kM * K + N * K);
      for (int blk = 0; blk < K / int(kWidth); ++blk) {
        tma_load_2d(sa + blk * kM * kWidth, &map_a, &bar, blk * kWidth, 0);
        tma_load_2d(sb + blk * N * kWidth, &map_b, &bar, blk * kWidth, 0);
      }
    }
    mbarrier_wait(&bar, 0);
  } else {
    for (int i = tid; i < kM * K; i += 128) sa[kmajor_offset(S, kM, i / K, i % K)] = a[i];
    for (int i = tid; i < N * K; i += 128) sb[kmajor_offset(S, N, i / K, i % K)] = b[i];
    fence_proxy_async_smem();
    __syncthreads();
  }
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  const int warp = tid / 32, lane = tid % 32;
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < K / 32; ++ks) {
    const uint64_t desc_b = kmajor_descriptor(smem_address(sb), S, N, ks * 32);
    if constexpr (F == Fill::kRegistersA) {
      uint32_t frag[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint8_t* p = a + a_frag_row(warp, lane, j) * K + ks * 32 + a_frag_k(lane, j);
        frag[j] = p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24);
      }
      WgmmaE4m3<N>::rs(acc, frag, desc_b, ks > 0);
    } else {
      const uint64_t desc_a = kmajor_descriptor(smem_address(sa), S, kM, ks * 32);
      WgmmaE4m3<N>::ss(acc, desc_a, desc_b, ks > 0);
    }
  }
  wgmma_commit_group();
  wgmma_wait_group<0>();
  wgmma_fence_operands(acc);
#pragma unroll
  for (int r = 0; r < N / 2; ++r) d[acc_row(warp, lane, r) * N + acc_col(lane, r)] = acc[r];
}

template <int N, Swizzle S, int K, Fill F>
void run_case() {
  FP8DSA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1234 + N + K + int(F));
  // Values in {+-0.5, +-1}: every partial sum is a multiple of 0.25 below 2^10, exact in the
  // reduced-precision accumulator of FP8 wgmma (about 13 mantissa bits), so the result must
  // match exactly and any layout, swizzle or descriptor error shows.
  std::uniform_int_distribution<int> pick(0, 3);
  const float kValues[4] = {-1.0f, -0.5f, 0.5f, 1.0f};
  auto dist = [&](std::mt19937& g) { return kValues[pick(g)]; };
  std::vector<uint8_t> a(kM * K), b(N * K);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    __nv_fp8_e4m3 v(dist(rng));
    a[i] = v.__x;
    af[i] = float(v);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    __nv_fp8_e4m3 v(dist(rng));
    b[i] = v.__x;
    bf[i] = float(v);
  }
  DeviceBuffer<uint8_t> da(a), db(b);
  DeviceBuffer<float> dd(size_t(kM) * N);
  CUtensorMap map_a{}, map_b{};
  if constexpr (F == Fill::kTma) {
    ASSERT_TRUE(make_tensor_map_2d_u8(&map_a, da.get(), kM, K, K, kM, swizzle_width_bytes(S), S).is_ok());
    ASSERT_TRUE(make_tensor_map_2d_u8(&map_b, db.get(), N, K, K, N, swizzle_width_bytes(S), S).is_ok());
  }
  const int smem = ((kM * K + 1023) / 1024) * 1024 + N * K + 1024;
  auto kernel = wgmma_gemm_kernel<N, S, K, F>;
  ASSERT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), cudaSuccess);
  kernel<<<1, 128, smem>>>(da.get(), db.get(), dd.get(), map_a, map_b);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> d = dd.download();
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += double(af[m * K + k]) * bf[n * K + k];
      ASSERT_EQ(d[m * N + n], ref) << "m=" << m << " n=" << n;
    }
  }
}

TEST(WgmmaE4m3Gemm, Stores128BN64) { run_case<64, Swizzle::k128B, 128, Fill::kStores>(); }
TEST(WgmmaE4m3Gemm, Stores128BN128K256) { run_case<128, Swizzle::k128B, 256, Fill::kStores>(); }
TEST(WgmmaE4m3Gemm, Stores64BN64K576) { run_case<64, Swizzle::k64B, 576, Fill::kStores>(); }
TEST(WgmmaE4m3Gemm, Stores64BN256K64) { run_case<256, Swizzle::k64B, 64, Fill::kStores>(); }
TEST(WgmmaE4m3Gemm, Tma128BN128) { run_case<128, Swizzle::k128B, 128, Fill::kTma>(); }
TEST(WgmmaE4m3Gemm, Tma64BN64K576) { run_case<64, Swizzle::k64B, 576, Fill::kTma>(); }
TEST(WgmmaE4m3Gemm, Tma128BN16) { run_case<16, Swizzle::k128B, 128, Fill::kTma>(); }
TEST(WgmmaE4m3Gemm, RegistersA128BN256) { run_case<256, Swizzle::k128B, 128, Fill::kRegistersA>(); }
TEST(WgmmaE4m3Gemm, RegistersA64BN8) { run_case<8, Swizzle::k64B, 64, Fill::kRegistersA>(); }

}  // namespace
}  // namespace fp8dsa::hopper
