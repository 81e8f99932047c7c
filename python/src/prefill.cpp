// _fp8dsa.prefill / prefill_cpu / prefill_workspace_bytes: the indexer's arrays (index_q, index_k,
// index_k_scale, weights, ks, ke) and the attention's (q, kv, attn_sink, out, max_logits, lse) in
// one call; the selected rows live in the workspace. Their *_check forms, every argument but the
// outputs and the workspace, for the Python layer to call before it allocates them.
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "cpu_time_limit.h"
#include "field_names.h"
#include "fp8dsa/cpu_time.h"
#include "fp8dsa/pipeline.h"
#include "kernel_choice.h"
#include "library_call.h"
#include "stage_params.h"

namespace fp8dsa::python {
namespace {

// validate(PrefillParams) in the arguments' words: its messages say which stage they come from
// ("prefill: indexer: ...", "prefill: sparse_mla: ..."), the rest are the pipeline's own.
void raise_if_invalid(const PrefillParams& p) {
  const Status status = validate(p);
  const std::string& message = status.message();
  const auto from = [&](const char* stage) { return message.rfind(stage, 0) == 0; };
  FieldNames names = {{"indexer.kernel", "indexer_kernel"},
                      {"kAuto", "'auto'"},
                      {"kQResident", "'q_resident'"},
                      {"true", "True"},
                      {"attention.kernel", "attention_kernel"},
                      {"indexer.num_tokens", "index_q's T"},
                      {"indexer.num_keys", "index_k's N"},
                      {"attention.num_tokens", "q's T"},
                      {"attention.num_kv", "kv's N"}};
  if (from("prefill: indexer:")) names = indexer_field_names(kPrefillIndexerArrayNames);
  if (from("prefill: sparse_mla:")) names = attention_field_names();
  raise_if_error(in_argument_terms(status, names));
}

PrefillParams prefill_params(ArrayChecker& arrays, const InputArray& index_q, const InputArray& index_k,
                             const InputArray& index_k_scale, const InputArray& weights,
                             const InputArray& ks, const InputArray& ke, const InputArray& q,
                             const InputArray& kv, float sm_scale, int topk, int d_v,
                             const std::optional<InputArray>& attn_sink, float q_scale, float kv_scale,
                             bool fused, const OutputArray* out, const OutputArray* max_logits,
                             const OutputArray* lse) {
  PrefillParams p;
  p.indexer = indexer_params(arrays, kPrefillIndexerArrayNames, index_q, index_k, index_k_scale,
                             weights, ks, ke);
  const AttentionArrays views = attention_arrays(arrays, q, kv, out, max_logits, lse, d_v);
  p.attention = attention_params(arrays, views, sm_scale, d_v, attn_sink, q_scale, kv_scale);
  p.topk = topk;
  p.fused = fused;
  // The two stages share the tokens and the key rows.
  arrays.expect_extent(views.q, 0, p.indexer.num_tokens, "index_q's T");
  arrays.expect_extent(views.kv, 0, p.indexer.num_keys, "index_k's N");
  raise_if_invalid(p);
  check_attention_out(arrays, views, p.attention);
  return p;
}

size_t prefill_workspace_bytes(int64_t num_tokens, int64_t num_keys, int topk, bool fused,
                               int64_t selection_chunk_tokens) {
  PrefillParams p;
  p.indexer.num_tokens = num_tokens;
  p.indexer.num_keys = num_keys;
  p.topk = topk;
  p.fused = fused;
  p.selection_chunk_tokens = selection_chunk_tokens;
  size_t bytes = 0;
  raise_if_error(fp8dsa::prefill_workspace_bytes(p, &bytes));
  return bytes;
}

void prefill(const InputArray& index_q, const InputArray& index_k, const InputArray& index_k_scale,
             const InputArray& weights, const InputArray& ks, const InputArray& ke, const InputArray& q,
             const InputArray& kv, float sm_scale, int topk, int d_v,
             const std::optional<InputArray>& attn_sink, float q_scale, float kv_scale, bool fused,
             const OutputArray& out, const OutputArray& max_logits, const OutputArray& lse,
             const std::optional<OutputArray>& workspace, const std::string& indexer_kernel,
             const std::string& attention_kernel, uintptr_t stream, bool split_epilogue) {
  ArrayChecker arrays("prefill", Placement::kCuda);
  PrefillParams p = prefill_params(arrays, index_q, index_k, index_k_scale, weights, ks, ke, q, kv,
                                   sm_scale, topk, d_v, attn_sink, q_scale, kv_scale, fused, &out,
                                   &max_logits, &lse);
  p.indexer.kernel = indexer_kernel_from_name(arrays, indexer_kernel);
  p.indexer.split_epilogue = split_epilogue;
  p.attention.kernel = sparse_mla_kernel_from_name(arrays, attention_kernel);
  const Workspace space = aligned_workspace(arrays, workspace);
  p.workspace = space.data;
  p.workspace_bytes = space.bytes;
  p.stream = as_stream(stream);
  run_library_call(arrays.device_id(), [&] { return fp8dsa::prefill(p); });
}

void prefill_cpu(const InputArray& index_q, const InputArray& index_k, const InputArray& index_k_scale,
                 const InputArray& weights, const InputArray& ks, const InputArray& ke,
                 const InputArray& q, const InputArray& kv, float sm_scale, int topk, int d_v,
                 const std::optional<InputArray>& attn_sink, float q_scale, float kv_scale,
                 const OutputArray& out, const OutputArray& max_logits, const OutputArray& lse) {
  ArrayChecker arrays("reference.prefill", Placement::kHost);
  const PrefillParams p = prefill_params(arrays, index_q, index_k, index_k_scale, weights, ks, ke, q,
                                         kv, sm_scale, topk, d_v, attn_sink, q_scale, kv_scale,
                                         /*fused=*/false, &out, &max_logits, &lse);
  run_library_call(-1, [&] { return reference::prefill_cpu(p); });
}

// Every argument of prefill / prefill_cpu but the outputs and the workspace it is about to allocate.
void prefill_check(const InputArray& index_q, const InputArray& index_k, const InputArray& index_k_scale,
                   const InputArray& weights, const InputArray& ks, const InputArray& ke, const InputArray& q,
                   const InputArray& kv, float sm_scale, int topk, int d_v,
                   const std::optional<InputArray>& attn_sink, float q_scale, float kv_scale, bool fused,
                   const std::string& indexer_kernel, const std::string& attention_kernel) {
  ArrayChecker arrays("prefill", Placement::kCuda);
  PrefillParams p = prefill_params(arrays, index_q, index_k, index_k_scale, weights, ks, ke, q, kv, sm_scale,
                                   topk, d_v, attn_sink, q_scale, kv_scale, fused, nullptr, nullptr, nullptr);
  p.indexer.kernel = indexer_kernel_from_name(arrays, indexer_kernel);
  p.attention.kernel = sparse_mla_kernel_from_name(arrays, attention_kernel);
  raise_if_invalid(p);  // fused with a kernel other than the Q-resident scorer
}

// Also refuses a call estimated past max_seconds.
void prefill_cpu_check(const InputArray& index_q, const InputArray& index_k, const InputArray& index_k_scale,
                       const InputArray& weights, const InputArray& ks, const InputArray& ke,
                       const InputArray& q, const InputArray& kv, float sm_scale, int topk, int d_v,
                       const std::optional<InputArray>& attn_sink, float q_scale, float kv_scale,
                       double max_seconds) {
  ArrayChecker arrays("reference.prefill", Placement::kHost);
  const PrefillParams p = prefill_params(arrays, index_q, index_k, index_k_scale, weights, ks, ke, q, kv, sm_scale,
                                         topk, d_v, attn_sink, q_scale, kv_scale, /*fused=*/false, nullptr, nullptr,
                                         nullptr);
  const IndexerParams& index = p.indexer;
  const SparseMlaParams& attention = p.attention;
  refuse_past_time_limit(arrays, reference::indexer_cpu_flops(indexer_pairs(index), index.num_heads, index.head_dim),
                         reference::sparse_mla_cpu_flops(attention.num_heads, selected_keys(index, topk),
                                                         attention.d_qk, attention.d_v),
                         max_seconds, "fp8dsa.prefill");
}

}  // namespace

void bind_prefill(nb::module_& m) {
  m.def("prefill_workspace_bytes", &prefill_workspace_bytes, nb::arg("num_tokens"), nb::arg("num_keys"),
        nb::arg("topk"), nb::arg("fused"), nb::arg("selection_chunk_tokens") = 0);
  m.attr("MIN_SELECTION_CHUNK_TOKENS") = fp8dsa::kMinSelectionChunkTokens;
  m.def("prefill", &prefill, nb::arg("index_q"), nb::arg("index_k"), nb::arg("index_k_scale"),
        nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("q"), nb::arg("kv"), nb::arg("sm_scale"),
        nb::arg("topk"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("q_scale"),
        nb::arg("kv_scale"), nb::arg("fused"), nb::arg("out"), nb::arg("max_logits"), nb::arg("lse"),
        nb::arg("workspace").none(), nb::arg("indexer_kernel"), nb::arg("attention_kernel"),
        nb::arg("stream"), nb::arg("split_epilogue") = false);
  m.def("prefill_cpu", &prefill_cpu, nb::arg("index_q"), nb::arg("index_k"), nb::arg("index_k_scale"),
        nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("q"), nb::arg("kv"), nb::arg("sm_scale"),
        nb::arg("topk"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("q_scale"),
        nb::arg("kv_scale"), nb::arg("out"), nb::arg("max_logits"), nb::arg("lse"));
  m.def("prefill_check", &prefill_check, nb::arg("index_q"), nb::arg("index_k"), nb::arg("index_k_scale"),
        nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("q"), nb::arg("kv"), nb::arg("sm_scale"),
        nb::arg("topk"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("q_scale"),
        nb::arg("kv_scale"), nb::arg("fused"), nb::arg("indexer_kernel"), nb::arg("attention_kernel"));
  m.def("prefill_cpu_check", &prefill_cpu_check, nb::arg("index_q"), nb::arg("index_k"),
        nb::arg("index_k_scale"), nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("q"), nb::arg("kv"),
        nb::arg("sm_scale"), nb::arg("topk"), nb::arg("d_v"), nb::arg("attn_sink").none(), nb::arg("q_scale"),
        nb::arg("kv_scale"), nb::arg("max_seconds"));
}

}  // namespace fp8dsa::python
