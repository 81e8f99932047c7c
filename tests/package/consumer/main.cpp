// Built against an installed fp8dsa: one call into each of several static libraries (conversions,
// causal bounds, argument checks, the top-k CPU reference) through the public headers alone.
#include <cstdio>

#include "fp8dsa/fp8dsa.h"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "fp8dsa_consumer: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  if (fp8dsa::e4m3_to_float(fp8dsa::float_to_e4m3(1.5f)) != 1.5f) return fail("e4m3 round trip");

  const fp8dsa::SequenceLayout sequences[] = {{2, 3}};
  int32_t ks[2] = {};
  int32_t ke[2] = {};
  int64_t num_tokens = 0;
  int64_t num_keys = 0;
  if (!fp8dsa::build_causal_bounds(sequences, ks, ke, &num_tokens, &num_keys).is_ok() ||
      num_tokens != 2 || num_keys != 5 || ks[1] != 0 || ke[0] != 4 || ke[1] != 5) {
    return fail("build_causal_bounds");
  }

  fp8dsa::SparseMlaParams attention;
  attention.topk = 100;
  const fp8dsa::Status rejected = fp8dsa::validate(attention);
  if (rejected.code() != fp8dsa::StatusCode::kInvalidArgument) return fail("validate(topk = 100)");

  const float logits[4] = {0.5f, 2.0f, -1.0f, 1.0f};
  const int32_t row_start = 0;
  const int32_t row_end = 4;
  int32_t indices[2] = {-1, -1};
  fp8dsa::TopkParams topk;
  topk.num_rows = 1;
  topk.num_keys = 4;
  topk.logits = logits;
  topk.ks = &row_start;
  topk.ke = &row_end;
  topk.k = 2;
  topk.indices = indices;
  topk.sorted = true;
  if (!fp8dsa::reference::topk_cpu(topk).is_ok() || indices[0] != 1 || indices[1] != 3) {
    return fail("reference::topk_cpu");
  }
  std::printf("fp8dsa_consumer: ok (%s)\n", rejected.to_string().c_str());
  return 0;
}
