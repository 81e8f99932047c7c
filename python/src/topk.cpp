// _fp8dsa.topk / topk_cpu / topk_workspace_bytes: logits [T, N] f32, ks / ke [T] i32, indices
// [T, k] i32, and the page-table transform's page_table [B, P], row_seq / row_pos_base [T] i32;
// topk_check / topk_cpu_check, every argument but the indices, for the Python layer to call before it allocates them.
#include <optional>
#include <utility>

#include <nanobind/stl/optional.h>

#include "bindings.h"
#include "field_names.h"
#include "library_call.h"
#include "stage_params.h"
#include "fp8dsa/topk.h"

namespace fp8dsa::python {
namespace {

TopkParams topk_params(ArrayChecker& arrays, const InputArray& logits, const InputArray& ks,
                       const InputArray& ke, int k, bool sorted,
                       const std::optional<InputArray>& page_table, int page_size,
                       const std::optional<InputArray>& row_seq,
                       const std::optional<InputArray>& row_pos_base, const OutputArray* out) {
  const ArrayView logits_view = arrays.input("logits", logits, {2}, "[T, N]", Element::kF32);
  const ArrayView ks_view = arrays.input("ks", ks, {1}, "[T]", Element::kI32);
  const ArrayView ke_view = arrays.input("ke", ke, {1}, "[T]", Element::kI32);
  const ArrayView out_view = out ? arrays.output("out", *out, {2}, "[T, k]", Element::kI32)
                                 : arrays.planned_output("out", {logits_view.shape[0], k}, Element::kI32);

  TopkParams p;
  p.num_rows = logits_view.shape[0];
  p.num_keys = logits_view.shape[1];
  p.logits = static_cast<const float*>(logits_view.data);
  p.logits_stride = logits_view.field_stride(0);
  for (const ArrayView* bounds : {&ks_view, &ke_view}) {
    arrays.expect_extent(*bounds, 0, p.num_rows, "logits' T");
    arrays.expect_packed(*bounds);
  }
  p.ks = static_cast<const int32_t*>(ks_view.data);
  p.ke = static_cast<const int32_t*>(ke_view.data);
  p.k = k;
  p.sorted = sorted;
  arrays.expect_extent(out_view, 0, p.num_rows, "logits' T");
  p.indices = static_cast<int32_t*>(out_view.data);
  p.indices_stride = out_view.field_stride(0);
  set_page_table(arrays, page_table, page_size, row_seq, row_pos_base, "logits' T", &p);
  // out's width before its row stride is compared with k (k's own range is the Python layer's).
  arrays.expect_extent(out_view, 1, p.k, "k");
  raise_if_error(in_argument_terms(validate(p), topk_field_names("logits' T", "logits' N")));
  return p;
}

size_t topk_workspace_bytes(int64_t num_rows, int64_t num_keys, int k) {
  TopkParams p;
  p.num_rows = num_rows;
  p.num_keys = num_keys;
  p.k = k;
  size_t bytes = 0;
  raise_if_error(fp8dsa::topk_workspace_bytes(p, &bytes));
  return bytes;
}

void topk(const InputArray& logits, const InputArray& ks, const InputArray& ke, int k, bool sorted,
          const std::optional<InputArray>& page_table, int page_size,
          const std::optional<InputArray>& row_seq, const std::optional<InputArray>& row_pos_base,
          const OutputArray& out, const std::optional<OutputArray>& workspace, uintptr_t stream) {
  ArrayChecker arrays("topk", Placement::kCuda);
  TopkParams p = topk_params(arrays, logits, ks, ke, k, sorted, page_table, page_size, row_seq,
                             row_pos_base, &out);
  const Workspace space = aligned_workspace(arrays, workspace);
  p.workspace = space.data;
  p.workspace_bytes = space.bytes;
  p.stream = as_stream(stream);
  run_library_call(arrays.device_id(), [&] { return fp8dsa::topk(p); });
}

void topk_cpu(const InputArray& logits, const InputArray& ks, const InputArray& ke, int k, bool sorted,
              const std::optional<InputArray>& page_table, int page_size,
              const std::optional<InputArray>& row_seq, const std::optional<InputArray>& row_pos_base,
              const OutputArray& out) {
  ArrayChecker arrays("reference.topk", Placement::kHost);
  const TopkParams p = topk_params(arrays, logits, ks, ke, k, sorted, page_table, page_size, row_seq,
                                   row_pos_base, &out);
  run_library_call(-1, [&] { return reference::topk_cpu(p); });
}

// Every argument of topk / topk_cpu but the out it is about to allocate.
template <Placement placement>
void topk_check(const InputArray& logits, const InputArray& ks, const InputArray& ke, int k, bool sorted,
                const std::optional<InputArray>& page_table, int page_size,
                const std::optional<InputArray>& row_seq, const std::optional<InputArray>& row_pos_base) {
  ArrayChecker arrays(placement == Placement::kHost ? "reference.topk" : "topk", placement);
  topk_params(arrays, logits, ks, ke, k, sorted, page_table, page_size, row_seq, row_pos_base, nullptr);
}

}  // namespace

void bind_topk(nb::module_& m) {
  m.def("topk_workspace_bytes", &topk_workspace_bytes, nb::arg("num_rows"), nb::arg("num_keys"),
        nb::arg("k"));
  m.def("topk", &topk, nb::arg("logits"), nb::arg("ks"), nb::arg("ke"), nb::arg("k"), nb::arg("sorted"),
        nb::arg("page_table").none(), nb::arg("page_size"), nb::arg("row_seq").none(),
        nb::arg("row_pos_base").none(), nb::arg("out"), nb::arg("workspace").none(), nb::arg("stream"));
  for (const auto& [name, check] : {std::pair{"topk_check", &topk_check<Placement::kCuda>},
                                    std::pair{"topk_cpu_check", &topk_check<Placement::kHost>}}) {
    m.def(name, check, nb::arg("logits"), nb::arg("ks"), nb::arg("ke"), nb::arg("k"), nb::arg("sorted"),
          nb::arg("page_table").none(), nb::arg("page_size"), nb::arg("row_seq").none(),
          nb::arg("row_pos_base").none());
  }
  m.def("topk_cpu", &topk_cpu, nb::arg("logits"), nb::arg("ks"), nb::arg("ke"), nb::arg("k"),
        nb::arg("sorted"), nb::arg("page_table").none(), nb::arg("page_size"), nb::arg("row_seq").none(),
        nb::arg("row_pos_base").none(), nb::arg("out"));
}

}  // namespace fp8dsa::python
