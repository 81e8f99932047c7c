// The CUB yardstick for top-k: a full descending segmented radix sort of every row (values = column
// ids), then the first k columns of each row. The column ids are rebuilt on every call so the
// function stays stateless (that fill is part of what the baseline costs).
#include "topk_baseline.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include <cub/device/device_segmented_radix_sort.cuh>
#include <cuda_runtime.h>

namespace fp8dsa::bench {
namespace {

constexpr size_t kAlign = 256;

size_t align_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The scratch layout: sorted keys, column ids in and out, segment bounds (segment r covers
// [r * logits_stride, r * logits_stride + cols) of the [rows, logits_stride] arrays), then CUB's temporary storage.
struct Layout {
  size_t keys_out = 0, values_in = 0, values_out = 0, begins = 0, ends = 0, temp = 0, temp_bytes = 0,
         total = 0;
};

cudaError_t layout_for(int rows, int64_t logits_stride, int cols, Layout* layout) {
  const size_t items = static_cast<size_t>(rows) * static_cast<size_t>(logits_stride);
  Layout l;
  l.keys_out = 0;
  l.values_in = l.keys_out + align_up(items * sizeof(float));
  l.values_out = l.values_in + align_up(items * sizeof(int32_t));
  l.begins = l.values_out + align_up(items * sizeof(int32_t));
  l.ends = l.begins + align_up(rows * sizeof(int32_t));
  l.temp = l.ends + align_up(rows * sizeof(int32_t));
  if (items > static_cast<size_t>(INT32_MAX)) return cudaErrorInvalidValue;  // CUB's int offsets
  const cudaError_t err = cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, l.temp_bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(items),
      rows, static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(nullptr));
  l.total = l.temp + align_up(l.temp_bytes);
  *layout = l;
  return err;
}

__global__ void fill_column_ids(int32_t* values, int64_t logits_stride, int64_t items, int32_t* begins,
                                int32_t* ends, int rows, int cols) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < items; i += stride) {
    values[i] = static_cast<int32_t>(i % logits_stride);
    if (i < rows) {
      begins[i] = static_cast<int32_t>(i * logits_stride);
      ends[i] = static_cast<int32_t>(i * logits_stride + cols);
    }
  }
}

__global__ void copy_first_k(const int32_t* sorted_columns, int64_t logits_stride, int cols, int k,
                             int32_t* indices) {
  const int64_t row = blockIdx.y;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < k; j += gridDim.x * blockDim.x) {
    indices[row * k + j] = j < cols ? sorted_columns[row * logits_stride + j] : -1;
  }
}

}  // namespace

size_t cub_sort_topk_workspace_bytes(int rows, int cols, int k) {
  (void)k;
  Layout l;
  if (layout_for(rows, cols, cols, &l) != cudaSuccess) return 0;
  return l.total;
}

cudaError_t cub_sort_topk(const float* logits, int64_t logits_stride, int rows, int cols, int k,
                          int32_t* indices, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return cudaSuccess;
  Layout l;
  cudaError_t err = layout_for(rows, logits_stride, cols, &l);
  if (err != cudaSuccess) return err;
  if (workspace_bytes < l.total) return cudaErrorInvalidValue;
  auto* base = static_cast<char*>(workspace);
  auto* keys_out = reinterpret_cast<float*>(base + l.keys_out);
  auto* values_in = reinterpret_cast<int32_t*>(base + l.values_in);
  auto* values_out = reinterpret_cast<int32_t*>(base + l.values_out);
  auto* begins = reinterpret_cast<int32_t*>(base + l.begins);
  auto* ends = reinterpret_cast<int32_t*>(base + l.ends);
  const int64_t items = static_cast<int64_t>(rows) * logits_stride;

  fill_column_ids<<<1024, 256, 0, stream>>>(values_in, logits_stride, items, begins, ends, rows, cols);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  size_t temp_bytes = l.temp_bytes;
  err = cub::DeviceSegmentedRadixSort::SortPairsDescending(
      base + l.temp, temp_bytes, logits, keys_out, static_cast<const int32_t*>(values_in), values_out,
      static_cast<int>(items), rows, static_cast<const int32_t*>(begins),
      static_cast<const int32_t*>(ends), 0, static_cast<int>(sizeof(float) * 8), stream);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(std::min((k + 255) / 256, 8)), static_cast<unsigned>(rows));
  copy_first_k<<<grid, 256, 0, stream>>>(values_out, logits_stride, cols, k, indices);
  return cudaGetLastError();
}

}  // namespace fp8dsa::bench
