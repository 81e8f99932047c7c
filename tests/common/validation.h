// Shared by the validate() tests: stand-in pointers (aligned, never dereferenced by validate()) and
// the check that a Status is the expected rejection, naming its op and argument.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fp8dsa/status.h"

namespace fp8dsa::testing {

inline unsigned char* stand_in_arena() {
  alignas(256) static unsigned char bytes[4096];
  return bytes;
}

// A pointer `offset` bytes into a 256-byte-aligned static arena of 4096 bytes.
template <typename T>
T* at(int offset) {
  return reinterpret_cast<T*>(stand_in_arena() + offset);
}

// validate(p) fails with `code`, its message starts with `op_prefix` ("topk: ") and contains `needle`.
template <typename Params>
void expect_rejected(const Params& p, StatusCode code, const std::string& needle, const std::string& op_prefix) {
  const Status s = validate(p);
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos)
      << "message '" << s.message() << "' lacks '" << needle << "'";
  EXPECT_EQ(s.message().rfind(op_prefix, 0), 0u) << s.message();
}

}  // namespace fp8dsa::testing
