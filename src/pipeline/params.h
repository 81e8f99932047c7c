// Internal: the part of the PrefillParams checks that the workspace size depends on.
#pragma once

#include "fp8dsa/pipeline.h"

namespace fp8dsa::pipeline_detail {

// topk and the indexer's num_tokens / num_keys, with the messages validate() gives for them.
Status validate_shape(const PrefillParams& params);

}  // namespace fp8dsa::pipeline_detail
