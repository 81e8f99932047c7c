// The conversion passes of today's engines on a DeepSeek-V3.2 FP8 cache (bench baselines only): to bf16
// for FlashMLA's BF16 kernel, or to unit-scale e4m3 for SGLang's FP8 kernel (Q8KV8).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"

namespace fp8dsa::bench {

// kv: [num_rows] 656-byte rows (row_stride bytes apart) -> out: [num_rows, 576] bf16, packed.
Status dequantize_v32_rows(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint16_t* out,
                           cudaStream_t stream);

// kv: [num_rows] 656-byte rows -> out: [num_rows, 576] e4m3 at unit scale, packed: each nope value
// e4m3 * its block's scale and each bf16 rope value rounded to e4m3 (to nearest, saturating at 448).
Status requantize_v32_rows(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint8_t* out,
                           cudaStream_t stream);

}  // namespace fp8dsa::bench
