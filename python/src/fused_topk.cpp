// _fp8dsa.fused_topk / fused_topk_workspace_bytes: the indexer's arrays (DeepGEMM's
// fp8_mqa_logits layouts), the top-k's out [T, k] i32 and page-table arrays; no logits.
// fused_topk_check: every argument but the out and the workspace, for the Python layer to call
// before it allocates them.
#include <optional>

#include <nanobind/stl/optional.h>

#include "bindings.h"
#include "field_names.h"
#include "library_call.h"
#include "stage_params.h"
#include "fp8dsa/fused_topk.h"

namespace fp8dsa::python {
namespace {

size_t workspace_bytes(int64_t num_tokens, int64_t num_keys, int num_heads, int k) {
  FusedTopkParams p;
  p.scores.num_tokens = num_tokens;
  p.scores.num_keys = num_keys;
  p.scores.num_heads = num_heads;
  p.select.k = k;
  size_t bytes = 0;
  raise_if_error(fp8dsa::fused_topk_workspace_bytes(p, &bytes));
  return bytes;
}

// out: the indices, or none for the check made before the caller allocates them.
FusedTopkParams fused_topk_params(ArrayChecker& arrays, const InputArray& q, const InputArray& k,
                                  const InputArray& k_scale, const InputArray& weights, const InputArray& ks,
                                  const InputArray& ke, int topk, bool sorted,
                                  const std::optional<InputArray>& page_table, int page_size,
                                  const std::optional<InputArray>& row_seq,
                                  const std::optional<InputArray>& row_pos_base, const OutputArray* out) {
  FusedTopkParams p;
  p.scores = indexer_params(arrays, kIndexerArrayNames, q, k, k_scale, weights, ks, ke);
  const ArrayView out_view = out ? arrays.output("out", *out, {2}, "[T, k]", Element::kI32)
                                 : arrays.planned_output("out", {p.scores.num_tokens, topk}, Element::kI32);
  arrays.expect_extent(out_view, 0, p.scores.num_tokens, "q's T");
  p.select.num_rows = p.scores.num_tokens;
  p.select.k = topk;
  p.select.sorted = sorted;
  p.select.indices = static_cast<int32_t*>(out_view.data);
  p.select.indices_stride = out_view.field_stride(0);
  set_page_table(arrays, page_table, page_size, row_seq, row_pos_base, "q's T", &p.select);
  arrays.expect_extent(out_view, 1, topk, "k");
  // Messages of the scorer's checks start "fused_topk: indexer:", the selection's "fused_topk: topk:".
  const Status status = validate(p);
  const bool scorer = status.message().rfind("fused_topk: indexer:", 0) == 0;
  raise_if_error(in_argument_terms(status, scorer ? indexer_field_names(kIndexerArrayNames)
                                                  : topk_field_names("q's T", "k's N")));
  return p;
}

void run_fused_topk(const InputArray& q, const InputArray& k, const InputArray& k_scale, const InputArray& weights,
                    const InputArray& ks, const InputArray& ke, int topk, bool sorted,
                    const std::optional<InputArray>& page_table, int page_size,
                    const std::optional<InputArray>& row_seq, const std::optional<InputArray>& row_pos_base,
                    const OutputArray& out, const std::optional<OutputArray>& workspace, uintptr_t stream,
                    bool split_epilogue) {
  ArrayChecker arrays("fused_topk", Placement::kCuda);
  FusedTopkParams p = fused_topk_params(arrays, q, k, k_scale, weights, ks, ke, topk, sorted, page_table,
                                        page_size, row_seq, row_pos_base, &out);
  p.scores.split_epilogue = split_epilogue;
  const Workspace space = aligned_workspace(arrays, workspace);
  p.workspace = space.data;
  p.workspace_bytes = space.bytes;
  p.stream = as_stream(stream);
  run_library_call(arrays.device_id(), [&] { return fp8dsa::fused_topk(p); });
}

// Every argument of fused_topk but the out and the workspace it is about to allocate.
void fused_topk_check(const InputArray& q, const InputArray& k, const InputArray& k_scale,
                      const InputArray& weights, const InputArray& ks, const InputArray& ke, int topk, bool sorted,
                      const std::optional<InputArray>& page_table, int page_size,
                      const std::optional<InputArray>& row_seq, const std::optional<InputArray>& row_pos_base) {
  ArrayChecker arrays("fused_topk", Placement::kCuda);
  fused_topk_params(arrays, q, k, k_scale, weights, ks, ke, topk, sorted, page_table, page_size, row_seq,
                    row_pos_base, nullptr);
}

}  // namespace

void bind_fused_topk(nb::module_& m) {
  m.def("fused_topk_workspace_bytes", &workspace_bytes, nb::arg("num_tokens"), nb::arg("num_keys"),
        nb::arg("num_heads"), nb::arg("k"));
  m.def("fused_topk", &run_fused_topk, nb::arg("q"), nb::arg("k"), nb::arg("k_scale"), nb::arg("weights"),
        nb::arg("ks"), nb::arg("ke"), nb::arg("topk"), nb::arg("sorted"), nb::arg("page_table").none(),
        nb::arg("page_size"), nb::arg("row_seq").none(), nb::arg("row_pos_base").none(), nb::arg("out"),
        nb::arg("workspace").none(), nb::arg("stream"), nb::arg("split_epilogue") = false);
  m.def("fused_topk_check", &fused_topk_check, nb::arg("q"), nb::arg("k"), nb::arg("k_scale"),
        nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("topk"), nb::arg("sorted"),
        nb::arg("page_table").none(), nb::arg("page_size"), nb::arg("row_seq").none(),
        nb::arg("row_pos_base").none());
}

}  // namespace fp8dsa::python
