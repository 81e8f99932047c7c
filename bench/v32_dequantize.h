// The dequantisation pass of today's engines on a DeepSeek-V3.2 FP8 cache (bench baseline only).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"

namespace fp8dsa::bench {

// kv: [num_rows] 656-byte rows (row_stride bytes apart) -> out: [num_rows, 576] bf16, packed.
Status dequantize_v32_rows(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint16_t* out,
                           cudaStream_t stream);

}  // namespace fp8dsa::bench
