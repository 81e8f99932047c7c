// _fp8dsa.lse_merge / lse_merge_cpu: out_parts [R, T, h, d_v] bf16, lse_parts and max_logits_parts
// [R, T, h] f32, attn_sink [h] f32, out [T, h, d_v] bf16, lse / max_logits [T, h] f32; their
// *_check forms, every argument but the outputs, for the Python layer to call before it allocates them.
#include <optional>
#include <utility>

#include <nanobind/stl/optional.h>

#include "bindings.h"
#include "field_names.h"
#include "fp8dsa/lse_merge.h"
#include "library_call.h"
#include "stage_params.h"

namespace fp8dsa::python {
namespace {

LseMergeParams lse_merge_params(ArrayChecker& arrays, const InputArray& out_parts, const InputArray& lse_parts,
                                const std::optional<InputArray>& max_logits_parts,
                                const std::optional<InputArray>& attn_sink, const OutputArray* out,
                                const OutputArray* lse, const OutputArray* max_logits) {
  const ArrayView parts = arrays.input("out_parts", out_parts, {4}, "[R, T, h, d_v]", Element::kBF16);
  LseMergeParams p;
  p.num_parts = narrow_extent(arrays, parts, 0);
  p.num_tokens = parts.shape[1];
  p.num_heads = narrow_extent(arrays, parts, 2);
  p.d_v = narrow_extent(arrays, parts, 3);
  p.out_parts = parts.data;
  p.part_stride = parts.field_stride(0);
  p.token_stride = parts.field_stride(1);
  p.head_stride = parts.field_stride(2);
  const auto part_rows = [&](const char* name, const InputArray& array) {
    const ArrayView v = arrays.input(name, array, {3}, "[R, T, h]", Element::kF32);
    arrays.expect_extent(v, 0, p.num_parts, "out_parts' R");
    arrays.expect_extent(v, 1, p.num_tokens, "out_parts' T");
    arrays.expect_extent(v, 2, p.num_heads, "out_parts' h");
    arrays.expect_packed(v);
    return static_cast<const float*>(v.data);
  };
  p.lse_parts = part_rows("lse_parts", lse_parts);
  if (max_logits_parts) p.max_logits_parts = part_rows("max_logits_parts", *max_logits_parts);
  if (attn_sink) {
    p.attn_sink = static_cast<const float*>(
        arrays.vector("attn_sink", *attn_sink, "[h]", Element::kF32, p.num_heads, "out_parts' h").data);
  }
  const ArrayView out_view =
      out ? arrays.output("out", *out, {3}, "[T, h, d_v]", Element::kBF16)
          : arrays.planned_output("out", {p.num_tokens, p.num_heads, p.d_v}, Element::kBF16);
  arrays.expect_extent(out_view, 0, p.num_tokens, "out_parts' T");
  arrays.expect_extent(out_view, 1, p.num_heads, "out_parts' h");
  arrays.expect_extent(out_view, 2, p.d_v, "out_parts' d_v");
  p.out = out_view.data;
  p.out_token_stride = out_view.field_stride(0);
  p.out_head_stride = out_view.field_stride(1);
  const auto rows = [&](const char* name, const OutputArray* array) {
    const ArrayView v = array ? arrays.output(name, *array, {2}, "[T, h]", Element::kF32)
                              : arrays.planned_output(name, {p.num_tokens, p.num_heads}, Element::kF32);
    arrays.expect_extent(v, 0, p.num_tokens, "out_parts' T");
    arrays.expect_extent(v, 1, p.num_heads, "out_parts' h");
    arrays.expect_packed(v);
    return static_cast<float*>(v.data);
  };
  p.lse = rows("lse", lse);
  if (max_logits) p.max_logits = rows("max_logits", max_logits);
  raise_if_error(in_argument_terms(validate(p), lse_merge_field_names()));
  return p;
}

void lse_merge(const InputArray& out_parts, const InputArray& lse_parts,
               const std::optional<InputArray>& max_logits_parts, const std::optional<InputArray>& attn_sink,
               const OutputArray& out, const OutputArray& lse, const std::optional<OutputArray>& max_logits,
               uintptr_t stream) {
  ArrayChecker arrays("lse_merge", Placement::kCuda);
  LseMergeParams p = lse_merge_params(arrays, out_parts, lse_parts, max_logits_parts, attn_sink, &out, &lse,
                                      max_logits ? &*max_logits : nullptr);
  p.stream = as_stream(stream);
  run_library_call(arrays.device_id(), [&] { return fp8dsa::lse_merge(p); });
}

void lse_merge_cpu(const InputArray& out_parts, const InputArray& lse_parts,
                   const std::optional<InputArray>& max_logits_parts, const std::optional<InputArray>& attn_sink,
                   const OutputArray& out, const OutputArray& lse, const std::optional<OutputArray>& max_logits) {
  ArrayChecker arrays("reference.lse_merge", Placement::kHost);
  const LseMergeParams p = lse_merge_params(arrays, out_parts, lse_parts, max_logits_parts, attn_sink, &out, &lse,
                                            max_logits ? &*max_logits : nullptr);
  run_library_call(-1, [&] { return reference::lse_merge_cpu(p); });
}

// Every argument of lse_merge / lse_merge_cpu but the outputs it is about to allocate (max_logits
// with max_logits_parts).
template <Placement placement>
void lse_merge_check(const InputArray& out_parts, const InputArray& lse_parts,
                     const std::optional<InputArray>& max_logits_parts, const std::optional<InputArray>& attn_sink) {
  ArrayChecker arrays(placement == Placement::kHost ? "reference.lse_merge" : "lse_merge", placement);
  LseMergeParams p = lse_merge_params(arrays, out_parts, lse_parts, max_logits_parts, attn_sink, nullptr, nullptr,
                                      nullptr);
  if (p.max_logits_parts != nullptr) {
    p.max_logits = static_cast<float*>(arrays.planned_output("max_logits", {p.num_tokens, p.num_heads},
                                                             Element::kF32).data);
    raise_if_error(in_argument_terms(validate(p), lse_merge_field_names()));
  }
}

}  // namespace

void bind_lse_merge(nb::module_& m) {
  m.def("lse_merge", &lse_merge, nb::arg("out_parts"), nb::arg("lse_parts"), nb::arg("max_logits_parts").none(),
        nb::arg("attn_sink").none(), nb::arg("out"), nb::arg("lse"), nb::arg("max_logits").none(), nb::arg("stream"));
  m.def("lse_merge_cpu", &lse_merge_cpu, nb::arg("out_parts"), nb::arg("lse_parts"),
        nb::arg("max_logits_parts").none(), nb::arg("attn_sink").none(), nb::arg("out"), nb::arg("lse"),
        nb::arg("max_logits").none());
  for (const auto& [name, check] : {std::pair{"lse_merge_check", &lse_merge_check<Placement::kCuda>},
                                    std::pair{"lse_merge_cpu_check", &lse_merge_check<Placement::kHost>}}) {
    m.def(name, check, nb::arg("out_parts"), nb::arg("lse_parts"), nb::arg("max_logits_parts").none(),
          nb::arg("attn_sink").none());
  }
}

}  // namespace fp8dsa::python
