// TopkParams: stride resolution and the argument checks every entry point runs first. The
// workspace is checked by topk() itself (the references need none).
#include "fp8dsa/topk.h"

#include "core/no_throw.h"
#include "core/validate.h"
#include "topk/params.h"

namespace fp8dsa {

TopkParams TopkParams::resolved() const {
  TopkParams r = *this;
  if (r.logits_stride == 0) r.logits_stride = r.num_keys;
  if (r.indices_stride == 0) r.indices_stride = r.k;
  if (r.page_table_stride == 0) r.page_table_stride = r.pages_per_seq;
  return r;
}

namespace {

constexpr const char* kOp = "topk";

Status validate_unguarded(const TopkParams& params) {
  using namespace detail;
  const TopkParams p = params.resolved();

  FP8DSA_RETURN_IF_ERROR(detail::topk::validate_shape(p));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "logits_stride", p.logits_stride, p.num_keys, "num_keys"));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "indices_stride", p.indices_stride, p.k, "k"));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "logits", p.num_rows, p.logits_stride, 4));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "indices", p.num_rows, p.indices_stride, 4));

  const bool has_rows = p.num_rows > 0;
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "logits", p.logits, has_rows && p.num_keys > 0,
                                        "num_rows > 0 and num_keys > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "ks", p.ks, has_rows, "num_rows > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "ke", p.ke, has_rows, "num_rows > 0"));
  FP8DSA_RETURN_IF_ERROR(check_required(kOp, "indices", p.indices, has_rows, "num_rows > 0"));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "logits", p.logits, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "indices", p.indices, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "ks", p.ks, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "ke", p.ke, 4));

  if (p.page_table == nullptr) {
    // Without a table there is nothing for these to modify: a caller passing them expects a
    // transform that would silently not happen.
    if (p.row_seq != nullptr) {
      return invalid_argument("topk: row_seq is given but page_table is null");
    }
    if (p.row_pos_base != nullptr) {
      return invalid_argument("topk: row_pos_base is given but page_table is null");
    }
    if (p.page_size != 0) {
      return invalid_argument(concat("topk: page_size (", p.page_size, ") is given but page_table is null"));
    }
    return Status::ok();
  }
  FP8DSA_RETURN_IF_ERROR(check_range(kOp, "page_size", p.page_size, 1, kMaxExtent));
  FP8DSA_RETURN_IF_ERROR(check_range(kOp, "pages_per_seq", p.pages_per_seq, 1, kMaxExtent));
  FP8DSA_RETURN_IF_ERROR(check_at_least(kOp, "page_table_stride", p.page_table_stride,
                                        p.pages_per_seq, "pages_per_seq"));
  FP8DSA_RETURN_IF_ERROR(check_range(kOp, "num_seqs", p.num_seqs, 0, kMaxExtent));
  FP8DSA_RETURN_IF_ERROR(check_extent(kOp, "page_table", p.num_seqs, p.page_table_stride, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "page_table", p.page_table, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "row_seq", p.row_seq, 4));
  FP8DSA_RETURN_IF_ERROR(check_aligned(kOp, "row_pos_base", p.row_pos_base, 4));
  return Status::ok();
}

}  // namespace

namespace detail::topk {

Status validate_shape(const TopkParams& p) {
  using namespace detail;
  FP8DSA_RETURN_IF_ERROR(check_size(kOp, "num_rows", p.num_rows));
  FP8DSA_RETURN_IF_ERROR(check_size(kOp, "num_keys", p.num_keys));
  return check_range(kOp, "k", p.k, 1, 2048);
}

}  // namespace detail::topk

Status validate(const TopkParams& params) {
  return detail::no_throw(kOp, [&] { return validate_unguarded(params); });
}

}  // namespace fp8dsa
