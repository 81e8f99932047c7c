// _fp8dsa.sparse_mla_prefill / sparse_mla_cpu: the arrays of flash_mla_sparse_fwd, plus
// indices [T, topk] or [T, 1, topk] i32, topk_length [T] i32 and the kv format by name; their
// *_check forms, every argument but the outputs, for the Python layer to call before it allocates them.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "cpu_time_limit.h"
#include "field_names.h"
#include "fp8dsa/cpu_time.h"
#include "kernel_choice.h"
#include "library_call.h"
#include "stage_params.h"

namespace fp8dsa::python {
namespace {

SparseMlaParams sparse_mla_params(ArrayChecker& arrays, const InputArray& q, const InputArray& kv,
                                  const InputArray& indices, float sm_scale, int d_v,
                                  const std::optional<InputArray>& attn_sink,
                                  const std::optional<InputArray>& topk_length, float q_scale,
                                  float kv_scale, const OutputArray* out,
                                  const OutputArray* max_logits, const OutputArray* lse,
                                  const std::string& kv_format, int q_terms = 2) {
  const AttentionArrays views =
      attention_arrays(arrays, q, kv, out, max_logits, lse, d_v, kv_format_from_name(arrays, kv_format));
  SparseMlaParams p = attention_params(arrays, views, sm_scale, d_v, attn_sink, q_scale, kv_scale);
  p.q_terms = q_terms;

  const ArrayView index_view =
      arrays.input("indices", indices, {2, 3}, "[T, topk] or [T, 1, topk]", Element::kI32);
  arrays.expect_extent(index_view, 0, p.num_tokens, "q's T");
  if (index_view.ndim == 3) arrays.expect_extent(index_view, 1, 1, "one latent KV head");
  p.indices = static_cast<const int32_t*>(index_view.data);
  p.topk = narrow_extent(arrays, index_view, index_view.ndim - 1);
  p.indices_stride = index_view.field_stride(0);
  if (topk_length) {
    p.topk_length = static_cast<const int32_t*>(
        arrays.vector("topk_length", *topk_length, "[T]", Element::kI32, p.num_tokens, "q's T").data);
  }
  raise_if_error(in_argument_terms(validate(p), attention_field_names()));
  check_attention_out(arrays, views, p);
  return p;
}

void sparse_mla_prefill(const InputArray& q, const InputArray& kv, const InputArray& indices,
                        float sm_scale, int d_v, const std::optional<InputArray>& attn_sink,
                        const std::optional<InputArray>& topk_length, float q_scale, float kv_scale,
                        const OutputArray& out, const OutputArray& max_logits, const OutputArray& lse,
                        const std::string& kv_format, int q_terms, const std::string& kernel, uintptr_t stream) {
  ArrayChecker arrays("sparse_mla_prefill", Placement::kCuda);
  SparseMlaParams p = sparse_mla_params(arrays, q, kv, indices, sm_scale, d_v, attn_sink, topk_length,
                                        q_scale, kv_scale, &out, &max_logits, &lse, kv_format, q_terms);
  p.kernel = sparse_mla_kernel_from_name(arrays, kernel);
  p.stream = as_stream(stream);
  run_library_call(arrays.device_id(), [&] { return fp8dsa::sparse_mla_prefill(p); });
}

void sparse_mla_cpu(const InputArray& q, const InputArray& kv, const InputArray& indices, float sm_scale,
                    int d_v, const std::optional<InputArray>& attn_sink,
                    const std::optional<InputArray>& topk_length, float q_scale, float kv_scale,
                    const OutputArray& out, const OutputArray& max_logits, const OutputArray& lse,
                    const std::string& kv_format) {
  ArrayChecker arrays("reference.sparse_mla_prefill", Placement::kHost);
  const SparseMlaParams p = sparse_mla_params(arrays, q, kv, indices, sm_scale, d_v, attn_sink, topk_length,
                                              q_scale, kv_scale, &out, &max_logits, &lse, kv_format);
  run_library_call(-1, [&] { return reference::sparse_mla_cpu(p); });
}

// Every argument of sparse_mla_prefill / sparse_mla_cpu but the outputs it is about to allocate.
void sparse_mla_check(const InputArray& q, const InputArray& kv, const InputArray& indices, float sm_scale,
                      int d_v, const std::optional<InputArray>& attn_sink,
                      const std::optional<InputArray>& topk_length, float q_scale, float kv_scale,
                      const std::string& kv_format, int q_terms, const std::string& kernel) {
  ArrayChecker arrays("sparse_mla_prefill", Placement::kCuda);
  sparse_mla_params(arrays, q, kv, indices, sm_scale, d_v, attn_sink, topk_length, q_scale, kv_scale, nullptr,
                    nullptr, nullptr, kv_format, q_terms);
  sparse_mla_kernel_from_name(arrays, kernel);
}

// Also refuses a call estimated past max_seconds.
void sparse_mla_cpu_check(const InputArray& q, const InputArray& kv, const InputArray& indices, float sm_scale,
                          int d_v, const std::optional<InputArray>& attn_sink,
                          const std::optional<InputArray>& topk_length, float q_scale, float kv_scale,
                          const std::string& kv_format, double max_seconds) {
  ArrayChecker arrays("reference.sparse_mla_prefill", Placement::kHost);
  const SparseMlaParams p = sparse_mla_params(arrays, q, kv, indices, sm_scale, d_v, attn_sink, topk_length, q_scale,
                                              kv_scale, nullptr, nullptr, nullptr, kv_format);
  refuse_past_time_limit(arrays, 0.0, reference::sparse_mla_cpu_flops(p.num_heads, attention_keys(p), p.d_qk, p.d_v),
                         max_seconds, "fp8dsa.sparse_mla_prefill");
}

}  // namespace

void bind_sparse_mla(nb::module_& m) {
  m.def("sparse_mla_prefill", &sparse_mla_prefill, nb::arg("q"), nb::arg("kv"), nb::arg("indices"),
        nb::arg("sm_scale"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("topk_length").none(),
        nb::arg("q_scale"), nb::arg("kv_scale"), nb::arg("out"), nb::arg("max_logits"), nb::arg("lse"),
        nb::arg("kv_format"), nb::arg("q_terms"), nb::arg("kernel"), nb::arg("stream"));
  m.def("sparse_mla_cpu", &sparse_mla_cpu, nb::arg("q"), nb::arg("kv"), nb::arg("indices"),
        nb::arg("sm_scale"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("topk_length").none(),
        nb::arg("q_scale"), nb::arg("kv_scale"), nb::arg("out"), nb::arg("max_logits"), nb::arg("lse"),
        nb::arg("kv_format"));
  m.def("sparse_mla_check", &sparse_mla_check, nb::arg("q"), nb::arg("kv"), nb::arg("indices"),
        nb::arg("sm_scale"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("topk_length").none(),
        nb::arg("q_scale"), nb::arg("kv_scale"), nb::arg("kv_format"), nb::arg("q_terms"), nb::arg("kernel"));
  m.def("sparse_mla_cpu_check", &sparse_mla_cpu_check, nb::arg("q"), nb::arg("kv"), nb::arg("indices"),
        nb::arg("sm_scale"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("topk_length").none(),
        nb::arg("q_scale"), nb::arg("kv_scale"), nb::arg("kv_format"), nb::arg("max_seconds"));
}

}  // namespace fp8dsa::python
