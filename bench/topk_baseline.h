// The top-k yardstick the benchmark times beside fp8dsa::topk: CUB's segmented radix sort of every
// row (keys descending, values = column), then the first k columns of each row.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace fp8dsa::bench {

// Scratch bytes the baseline needs for a rows x cols problem with k outputs per row.
size_t cub_sort_topk_workspace_bytes(int rows, int cols, int k);

// indices [rows, k] i32 (absolute columns); rows read logits [rows, logits_stride]. Asynchronous on stream.
cudaError_t cub_sort_topk(const float* logits, int64_t logits_stride, int rows, int cols, int k,
                          int32_t* indices, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream);

}  // namespace fp8dsa::bench
