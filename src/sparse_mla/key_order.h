// The order of a 64-key tile's keys along the K dimension of the P.V wgmma (P rows, V^T rows).
//
// A thread's m64n64 score accumulator holds keys {2t, 2t+1, 2t+8, 2t+9} (t = lane % 4) of each
// 16-key group, where its 8-bit A fragment expects K positions 4t..4t+3 (FlashAttention-3's
// observation). Storing keys in this permuted order lets P go from the accumulators into fragments,
// or into shared memory as whole words, with no shuffle; V^T follows the same order. K position p
// holds key v_key_at(p).
#pragma once

#include "core/host_device.h"

namespace fp8dsa::detail::sparse_mla {

FP8DSA_HOST_DEVICE constexpr int v_key_at(int p) {
  const int q = p % 16;
  return (p / 16) * 16 + 2 * (q / 4) + (q % 2) + 8 * ((q / 2) % 2);
}

// The K position (0..63) of key k: the inverse of v_key_at.
FP8DSA_HOST_DEVICE constexpr int v_pos_of_key(int k) {
  const int r = k % 16;
  return (k / 16) * 16 + 4 * ((r % 8) / 2) + 2 * (r / 8) + r % 2;
}

// The score accumulator register (m64n64, hopper/wgmma_layout.h) whose probability goes into byte b
// of 8-bit A-fragment word j of k-step ks: keys 2t, 2t + 1 (bytes 0, 1) and 2t + 8, 2t + 9 (bytes
// 2, 3) of 16-key group 2 ks + j / 2, row half j % 2; with this, K position p holds v_key_at(p).
FP8DSA_HOST_DEVICE constexpr int p_fragment_register(int ks, int j, int b) {
  return 16 * ks + 8 * (j / 2) + 2 * (j % 2) + (b % 2) + 4 * (b / 2);
}

}  // namespace fp8dsa::detail::sparse_mla
