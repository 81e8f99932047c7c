// Stage 2: top-k selection (SPEC section 2).
//
// For each row t, the min(k, ke[t] - ks[t]) keys s in [ks[t], ke[t]) with the largest logits[t, s],
// as absolute key rows, unused slots -1. NaN ranks lowest, -inf is a valid candidate, ties at the
// threshold are broken either way, every returned index is valid and distinct. validate() reads no
// tensor: logits may hold any value (NaN included), ks / ke any value (clamped).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "fp8dsa/types.h"

namespace fp8dsa {

struct TopkParams {
  int64_t num_rows = 0;  // T
  int64_t num_keys = 0;  // N: columns of logits; ks/ke are clamped to [0, N]

  const float* logits = nullptr;  // [T, logits_stride] f32
  int64_t logits_stride = 0;      // >= N; 0 = N

  const int32_t* ks = nullptr;  // [T]
  const int32_t* ke = nullptr;  // [T]

  int k = 2048;                // 1..2048
  int32_t* indices = nullptr;  // [T, indices_stride] i32
  int64_t indices_stride = 0;  // >= k; 0 = k
  bool sorted = false;         // return the selected keys by descending score (ties in any order)

  // Optional page-table transform, applied in the same kernel: with pos = index - pos_base,
  //   out = page_table[seq][pos / page_size] * page_size + pos % page_size,
  // and -1 where the page entry is negative, pos / page_size >= pages_per_seq, or the row's
  // sequence is negative or (num_seqs > 0) not below num_seqs. Without a table, page_size,
  // row_seq and row_pos_base must be left at 0 / nullptr (a transform that would not happen is
  // refused).
  const int32_t* page_table = nullptr;  // [num_seqs, page_table_stride]
  int64_t page_table_stride = 0;        // >= pages_per_seq; 0 = pages_per_seq
  // The table's rows: a sequence outside [0, num_seqs) maps every index to -1. 0 = not bounded (the
  // caller guarantees that every row's sequence is a row of the table).
  int64_t num_seqs = 0;
  int pages_per_seq = 0;
  int page_size = 0;
  const int32_t* row_seq = nullptr;       // [T] sequence of each row; nullptr: row t is sequence t
  const int32_t* row_pos_base = nullptr;  // [T] key row of logical position 0; nullptr: ks[t]

  void* workspace = nullptr;  // at least topk_workspace_bytes(params), kWorkspaceAlignment (256)-byte aligned
  size_t workspace_bytes = 0;

  cudaStream_t stream = nullptr;

  TopkParams resolved() const;
};

Status validate(const TopkParams& params);

// Workspace the GPU path needs for these params: depends on num_rows, num_keys and k only (not on
// pointers). Rejects (InvalidArgument) the values validate() would reject; *bytes is written only
// on success.
Status topk_workspace_bytes(const TopkParams& params, size_t* bytes);
// The same as a number: SIZE_MAX (no workspace suffices) where the form above fails.
size_t topk_workspace_bytes(const TopkParams& params);

// GPU top-k. No allocation, no host synchronisation: CUDA-graph capturable.
Status topk(const TopkParams& params);

namespace reference {
// Exact top-k on the host (f32 logits compared as given; NaN lowest). Host pointers.
Status topk_cpu(const TopkParams& params);
// Simple GPU reference (one block per row, correctness only). Device pointers.
Status topk_gpu(const TopkParams& params);
}  // namespace reference

}  // namespace fp8dsa
