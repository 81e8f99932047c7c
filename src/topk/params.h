// Internal: the part of the TopkParams checks that the workspace size depends on.
#pragma once

#include "fp8dsa/topk.h"

namespace fp8dsa::detail::topk {

// num_rows, num_keys and k, with the messages validate() gives for them.
Status validate_shape(const TopkParams& params);

}  // namespace fp8dsa::detail::topk
