// Host side of TMA: building CUtensorMap descriptors without linking the driver library.
// cuTensorMapEncodeTiled is fetched at run time through cudaGetDriverEntryPointByVersion, so the
// binaries start on machines that only have a stub driver (CI).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "fp8dsa/status.h"
#include "hopper/swizzle.h"

namespace fp8dsa::hopper {

// A 2-D tensor of 1-byte elements (e4m3 is encoded as UINT8): `rows` rows of `cols` bytes, `row_stride`
// bytes apart (a multiple of 16), loaded in boxes of box_rows x box_cols bytes. Out-of-range box
// elements are filled with zeros.
Status make_tensor_map_2d_u8(CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols,
                             uint64_t row_stride, uint32_t box_rows, uint32_t box_cols, Swizzle swizzle);

// A 3-D tensor of 1-byte elements: dims innermost first (d0 contiguous), strides in bytes for d1
// and d2 (multiples of 16).
Status make_tensor_map_3d_u8(CUtensorMap* map, const void* base, const uint64_t (&dims)[3],
                             const uint64_t (&strides)[2], const uint32_t (&box)[3], Swizzle swizzle);

}  // namespace fp8dsa::hopper
