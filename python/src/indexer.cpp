// _fp8dsa.indexer_logits / indexer_logits_cpu: the arrays of DeepGEMM's fp8_mqa_logits, logits
// [T, M] f32 with M >= N (the first N columns are the keys' logits); their *_check forms, every
// argument but the logits, for the Python layer to call before it allocates them;
// build_causal_bounds.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cpu_time_limit.h"
#include "field_names.h"
#include "fp8dsa/cpu_time.h"
#include "kernel_choice.h"
#include "library_call.h"
#include "stage_params.h"

namespace fp8dsa::python {
namespace {

// logits: the output, or none for the check made before the caller allocates it (rows padded to
// kLogitsRowAlign floats, as the Python layer allocates them).
constexpr int64_t kLogitsRowAlign = 4;

IndexerParams indexer_logits_params(ArrayChecker& arrays, const InputArray& q, const InputArray& k,
                                    const InputArray& k_scale, const InputArray& weights,
                                    const InputArray& ks, const InputArray& ke, const OutputArray* logits,
                                    bool fill_masked) {
  IndexerParams p = indexer_params(arrays, kIndexerArrayNames, q, k, k_scale, weights, ks, ke);
  const int64_t padded_keys = (p.num_keys + kLogitsRowAlign - 1) / kLogitsRowAlign * kLogitsRowAlign;
  const ArrayView logits_view =
      logits ? arrays.output("logits", *logits, {2}, "[T, M] with M >= N", Element::kF32)
             : arrays.planned_output("logits", {p.num_tokens, padded_keys}, Element::kF32);
  arrays.expect_extent(logits_view, 0, p.num_tokens, "q's T");
  if (logits_view.shape[1] < p.num_keys) {
    arrays.fail("logits has " + std::to_string(logits_view.shape[1]) + " columns, fewer than k's N (" +
                std::to_string(p.num_keys) + ")");
  }
  p.logits = static_cast<float*>(logits_view.data);
  // A single row's stride addresses nothing; its width is what the caller allocated.
  p.logits_stride = logits_view.shape[0] > 1 ? logits_view.strides[0] : logits_view.shape[1];
  // The library's words for this ("pass logits_stride = 12") name a field; these name the array to make.
  if (p.logits_stride % kLogitsRowAlign != 0) {
    const int64_t padded = (p.logits_stride + kLogitsRowAlign - 1) / kLogitsRowAlign * kLogitsRowAlign;
    arrays.fail("logits rows must start 16 bytes apart (a stride in dimension 0 that is a multiple of " +
                std::to_string(kLogitsRowAlign) + " floats; given " + std::to_string(p.logits_stride) +
                "): pass a [T, N] view of rows of " +
                std::to_string(padded) + " floats, or no logits to have them allocated");
  }
  p.fill_masked = fill_masked;
  raise_if_error(in_argument_terms(validate(p), indexer_field_names(kIndexerArrayNames)));
  return p;
}

void indexer_logits(const InputArray& q, const InputArray& k, const InputArray& k_scale,
                    const InputArray& weights, const InputArray& ks, const InputArray& ke,
                    const OutputArray& logits, bool fill_masked, const std::string& kernel,
                    uintptr_t stream, bool split_epilogue) {
  ArrayChecker arrays("indexer_logits", Placement::kCuda);
  IndexerParams p = indexer_logits_params(arrays, q, k, k_scale, weights, ks, ke, &logits, fill_masked);
  p.split_epilogue = split_epilogue;
  p.kernel = indexer_kernel_from_name(arrays, kernel);
  p.stream = as_stream(stream);
  run_library_call(arrays.device_id(), [&] { return fp8dsa::indexer_logits(p); });
}

// Every argument of indexer_logits but the logits it is about to allocate.
void indexer_logits_check(const InputArray& q, const InputArray& k, const InputArray& k_scale,
                          const InputArray& weights, const InputArray& ks, const InputArray& ke,
                          const std::string& kernel) {
  ArrayChecker arrays("indexer_logits", Placement::kCuda);
  indexer_logits_params(arrays, q, k, k_scale, weights, ks, ke, nullptr, true);
  indexer_kernel_from_name(arrays, kernel);
}

void indexer_logits_cpu(const InputArray& q, const InputArray& k, const InputArray& k_scale,
                        const InputArray& weights, const InputArray& ks, const InputArray& ke,
                        const OutputArray& logits, bool fill_masked) {
  ArrayChecker arrays("reference.indexer_logits", Placement::kHost);
  const IndexerParams p =
      indexer_logits_params(arrays, q, k, k_scale, weights, ks, ke, &logits, fill_masked);
  run_library_call(-1, [&] { return reference::indexer_logits_cpu(p); });
}

// Also refuses a call estimated past max_seconds.
void indexer_logits_cpu_check(const InputArray& q, const InputArray& k, const InputArray& k_scale,
                              const InputArray& weights, const InputArray& ks, const InputArray& ke,
                              double max_seconds) {
  ArrayChecker arrays("reference.indexer_logits", Placement::kHost);
  const IndexerParams p = indexer_logits_params(arrays, q, k, k_scale, weights, ks, ke, nullptr, true);
  refuse_past_time_limit(arrays, reference::indexer_cpu_flops(indexer_pairs(p), p.num_heads, p.head_dim), 0.0,
                         max_seconds, "fp8dsa.indexer_logits");
}

using Int32Array = nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>;

Int32Array numpy_array(std::vector<int32_t> values) {
  auto* owned = new std::vector<int32_t>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<int32_t>*>(p); });
  return Int32Array(owned->data(), {owned->size()}, owner);
}

std::tuple<Int32Array, Int32Array, int64_t> build_causal_bounds(const std::vector<int64_t>& new_tokens,
                                                                const std::vector<int64_t>& cached_keys) {
  if (new_tokens.size() != cached_keys.size()) {
    throw nb::value_error(("build_causal_bounds: new_tokens has " + std::to_string(new_tokens.size()) +
                           " sequences, cached_keys " + std::to_string(cached_keys.size()))
                              .c_str());
  }
  std::vector<SequenceLayout> sequences(new_tokens.size());
  // The buffers are made only for counts the library accepts (each in [0, INT32_MAX], both totals
  // within INT32_MAX); otherwise none is, and the library's own check names the count.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  int64_t total_tokens = 0, total_keys = 0;
  bool fits = true;
  for (size_t b = 0; b < sequences.size(); ++b) sequences[b] = {new_tokens[b], cached_keys[b]};
  for (size_t b = 0; b < sequences.size(); ++b) {
    fits = new_tokens[b] >= 0 && new_tokens[b] <= kMax && cached_keys[b] >= 0 && cached_keys[b] <= kMax;
    if (!fits) break;
    total_tokens += new_tokens[b];  // each term <= INT32_MAX and the totals checked at every step: no overflow
    total_keys += new_tokens[b] + cached_keys[b];
    fits = total_tokens <= kMax && total_keys <= kMax;
    if (!fits) break;
  }
  std::vector<int32_t> ks, ke;
  try {
    ks.resize(fits ? static_cast<size_t>(total_tokens) : 0);
    ke.resize(ks.size());
  } catch (const std::bad_alloc&) {
    // A bare std::bad_alloc would name neither the call nor the size.
    const std::string message = "build_causal_bounds: cannot allocate ks and ke for " + std::to_string(total_tokens) +
                                " tokens (" + std::to_string(8 * total_tokens) + " bytes)";
    PyErr_SetString(PyExc_MemoryError, message.c_str());
    throw nb::python_error();
  }
  int64_t num_tokens = 0;
  int64_t num_keys = 0;
  raise_if_error(fp8dsa::build_causal_bounds(sequences, ks.empty() ? nullptr : ks.data(),
                                             ke.empty() ? nullptr : ke.data(), &num_tokens, &num_keys));
  return {numpy_array(std::move(ks)), numpy_array(std::move(ke)), num_keys};
}

}  // namespace

void bind_indexer(nb::module_& m) {
  m.attr("LOGITS_ROW_ALIGN") = kLogitsRowAlign;
  m.def("indexer_logits", &indexer_logits, nb::arg("q"), nb::arg("k"), nb::arg("k_scale"),
        nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("logits"), nb::arg("fill_masked"),
        nb::arg("kernel"), nb::arg("stream"), nb::arg("split_epilogue") = false);
  m.def("indexer_logits_check", &indexer_logits_check, nb::arg("q"), nb::arg("k"), nb::arg("k_scale"),
        nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("kernel"));
  m.def("indexer_logits_cpu", &indexer_logits_cpu, nb::arg("q"), nb::arg("k"), nb::arg("k_scale"),
        nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("logits"), nb::arg("fill_masked"));
  m.def("indexer_logits_cpu_check", &indexer_logits_cpu_check, nb::arg("q"), nb::arg("k"),
        nb::arg("k_scale"), nb::arg("weights"), nb::arg("ks"), nb::arg("ke"), nb::arg("max_seconds"));
  m.def("build_causal_bounds", &build_causal_bounds, nb::arg("new_tokens"), nb::arg("cached_keys"));
}

}  // namespace fp8dsa::python
