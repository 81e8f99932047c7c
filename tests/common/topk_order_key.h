// The top-k contract's order on the host (the kernels' order_key, radix_select.cuh): NaN lowest,
// -0 == +0, every other float in its own order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fp8dsa::testing {

inline uint32_t topk_order_key(float x) {
  if (std::isnan(x)) return 0u;
  uint32_t u = 0;
  if (x != 0.0f) std::memcpy(&u, &x, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

}  // namespace fp8dsa::testing
