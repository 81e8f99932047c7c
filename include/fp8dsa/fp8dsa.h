// Umbrella header for the public fp8dsa API.
#pragma once

#include "fp8dsa/cancel.h"
#include "fp8dsa/cpu_time.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/fused_topk.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/lse_merge.h"
#include "fp8dsa/pipeline.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"
#include "fp8dsa/topk.h"
#include "fp8dsa/types.h"
