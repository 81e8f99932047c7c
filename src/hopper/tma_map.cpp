#include "hopper/tma_map.h"

#include <mutex>
#include <string>

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

namespace fp8dsa::hopper {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn(Status* status) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static Status lookup;
  static std::once_flag once;
  std::call_once(once, [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                       cudaEnableDefault, &query);
    if (err != cudaSuccess || query != cudaDriverEntryPointSuccess || ptr == nullptr) {
      cudaGetLastError();
      lookup = {StatusCode::kCudaError,
                std::string("cuTensorMapEncodeTiled is not available from the driver (") +
                    cudaGetErrorString(err) + ")"};
      return;
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  });
  *status = lookup;
  return fn;
}

CUtensorMapSwizzle to_cu_swizzle(Swizzle s) {
  switch (s) {
    case Swizzle::k128B: return CU_TENSOR_MAP_SWIZZLE_128B;
    case Swizzle::k64B: return CU_TENSOR_MAP_SWIZZLE_64B;
    case Swizzle::k32B: return CU_TENSOR_MAP_SWIZZLE_32B;
    case Swizzle::kNone: break;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

template <int kRank>
Status encode_u8(CUtensorMap* map, const void* base, const uint64_t (&dims)[kRank],
                 const uint64_t (&strides)[kRank - 1], const uint32_t (&box)[kRank], Swizzle swizzle) {
  if (map == nullptr || base == nullptr) return invalid_argument("tensor map: null map or base pointer");
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) {
    return invalid_argument("tensor map: base address must be 16-byte aligned");
  }
  for (int i = 0; i < kRank - 1; ++i) {
    if (strides[i] % 16 != 0) {
      return invalid_argument("tensor map: stride " + std::to_string(strides[i]) +
                              " bytes is not a multiple of 16");
    }
  }
  if (swizzle != Swizzle::kNone && box[0] > swizzle_width_bytes(swizzle)) {
    return invalid_argument("tensor map: inner box of " + std::to_string(box[0]) +
                            " bytes exceeds the swizzle width");
  }
  Status status;
  auto fn = encode_tiled_fn(&status);
  if (!status.is_ok()) return status;
  cuuint64_t cu_dims[kRank];
  cuuint64_t cu_strides[kRank - 1];
  cuuint32_t cu_box[kRank];
  cuuint32_t elem_strides[kRank];
  for (int i = 0; i < kRank; ++i) {
    cu_dims[i] = dims[i];
    cu_box[i] = box[i];
    elem_strides[i] = 1;
  }
  for (int i = 0; i < kRank - 1; ++i) cu_strides[i] = strides[i];
  CUresult res = fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, kRank, const_cast<void*>(base), cu_dims,
                    cu_strides, cu_box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    to_cu_swizzle(swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS) {
    return {StatusCode::kCudaError, "cuTensorMapEncodeTiled failed with CUresult " + std::to_string(res)};
  }
  return Status::ok();
}

}  // namespace

Status make_tensor_map_2d_u8(CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols,
                             uint64_t row_stride, uint32_t box_rows, uint32_t box_cols, Swizzle swizzle) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {row_stride};
  const uint32_t box[2] = {box_cols, box_rows};
  return encode_u8<2>(map, base, dims, strides, box, swizzle);
}

Status make_tensor_map_3d_u8(CUtensorMap* map, const void* base, const uint64_t (&dims)[3],
                             const uint64_t (&strides)[2], const uint32_t (&box)[3], Swizzle swizzle) {
  return encode_u8<3>(map, base, dims, strides, box, swizzle);
}

}  // namespace fp8dsa::hopper
